package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a Route. The Route controller sets all five on every
// reconcile; Ready summarises the others.
const (
	// RouteReadyCondition is True when the edge serves the hostname for the
	// App, over HTTPS unless spec.tls.mode is None.
	RouteReadyCondition = "Ready"
	// RouteAdmittedCondition is True when the Route holds its hostname: the
	// name is not the platform's, the tenant proved it owns it
	// (DomainVerified), no other tenant's verified and older Route claims
	// it, no older Route of the tenant routes the same path prefix, and the
	// App it points to exists. The edge serves only admitted Routes.
	RouteAdmittedCondition = "Admitted"
	// RouteDomainVerifiedCondition is True when the tenant proved it owns
	// the hostname: a DNS TXT record _bex-challenge.<hostname> (for
	// *.example.com: _bex-challenge.example.com) holds the token the
	// platform gives the tenant for it, or the hostname is the default
	// hostname of one of the tenant's Apps. The message of False says which
	// record to create.
	RouteDomainVerifiedCondition = "DomainVerified"
	// RouteCertificateReadyCondition is True when a valid certificate for the
	// hostname is in place (or spec.tls.mode is None).
	RouteCertificateReadyCondition = "CertificateReady"
	// RouteDNSReadyCondition is True when the hostname resolves to the edge.
	RouteDNSReadyCondition = "DNSReady"
)

// Reasons of the Route conditions.
const (
	// RouteAcceptedReason (Admitted=True): the Route holds its hostname.
	RouteAcceptedReason = "Accepted"
	// RouteHostnameClaimedReason (Admitted=False): an older Route, maybe of
	// another tenant, already claims the hostname.
	RouteHostnameClaimedReason = "HostnameClaimed"
	// RouteHostnameReservedReason (Admitted=False, DomainVerified=False):
	// the platform serves the hostname itself (its apps' domain, the API,
	// the registry) or it is another tenant's default hostname.
	RouteHostnameReservedReason = "HostnameReserved"
	// RouteHostnameNotRegistrableReason (Admitted=False,
	// DomainVerified=False): the hostname is a public suffix (co.uk) or a
	// wildcard over one (*.co.uk), which nobody can prove to own.
	RouteHostnameNotRegistrableReason = "HostnameNotRegistrable"
	// RouteDomainNotVerifiedReason (Admitted=False): DomainVerified is not
	// True yet; the message says which record to create.
	RouteDomainNotVerifiedReason = "DomainNotVerified"
	// RouteAwaitingTXTRecordReason (DomainVerified=False): the TXT record
	// that proves ownership is not there (yet); the message names it and
	// its value.
	RouteAwaitingTXTRecordReason = "AwaitingTXTRecord"
	// RouteTXTRecordFoundReason (DomainVerified=True): the TXT record holds
	// the tenant's token.
	RouteTXTRecordFoundReason = "TXTRecordFound"
	// RouteTXTLookupFailedReason (DomainVerified=Unknown): DNS did not
	// answer for the TXT record; it is looked up again shortly.
	RouteTXTLookupFailedReason = "TXTLookupFailed"
	// RouteDefaultHostnameReason (DomainVerified): the hostname is the
	// default hostname of an App of the tenant, <app>-<tenant>.<domain>,
	// which needs no TXT record; False while that App does not exist.
	RouteDefaultHostnameReason = "DefaultHostname"
	// RouteAppNotFoundReason (Admitted=False): spec.appRef names no App in
	// the namespace, or the App has no such process.
	RouteAppNotFoundReason = "AppNotFound"
	// RouteDNSPointingHereReason (DNSReady=True): the hostname resolves to
	// the edge.
	RouteDNSPointingHereReason = "DNSPointingHere"
	// RouteDNSNotPointingHereReason (DNSReady=False): the hostname does not
	// resolve to the edge; the message says what it resolves to and what
	// record to create.
	RouteDNSNotPointingHereReason = "DNSNotPointingHere"
	// RouteCertificatePendingReason (CertificateReady=False): a certificate
	// is being obtained.
	RouteCertificatePendingReason = "CertificatePending"
	// RouteCertificateIssuedReason (CertificateReady=True): a certificate was
	// obtained and is not about to expire.
	RouteCertificateIssuedReason = "CertificateIssued"
	// RouteChallengeFailedReason (CertificateReady=False): the ACME challenge
	// for the hostname failed; the message carries the CA's answer.
	RouteChallengeFailedReason = "ChallengeFailed"
	// RouteSecretInvalidReason (CertificateReady=False): the Secret named by
	// spec.tls.secretName is missing or holds no valid certificate for the
	// hostname.
	RouteSecretInvalidReason = "SecretInvalid"
	// RouteIssuanceBudgetExhaustedReason (CertificateReady=False): the edge
	// refused to obtain a certificate for a new name the Route claims (under
	// a wildcard, one name per certificate) because the tenant got
	// certificates for as many new names as the operator allows per hour;
	// the message names the refused name and when there is room again.
	RouteIssuanceBudgetExhaustedReason = "IssuanceBudgetExhausted"
	// RouteTLSDisabledReason (CertificateReady=True): spec.tls.mode is None.
	RouteTLSDisabledReason = "TLSDisabled"
	// RouteServingReason (Ready=True): the edge serves the hostname.
	RouteServingReason = "Serving"
	// RouteNotServingReason (Ready=False): a condition above is False; the
	// message names it.
	RouteNotServingReason = "NotServing"
)

// TLSMode says where a Route's certificate comes from.
// +kubebuilder:validation:Enum=Auto;None;Secret
type TLSMode string

// The TLS modes.
const (
	// TLSModeAuto obtains a certificate with ACME when the hostname is first
	// requested.
	TLSModeAuto TLSMode = "Auto"
	// TLSModeNone serves plain HTTP only.
	TLSModeNone TLSMode = "None"
	// TLSModeSecret serves the certificate in a kubernetes.io/tls Secret.
	TLSModeSecret TLSMode = "Secret"
)

// Route serves a hostname with a process of an App. A hostname belongs to at
// most one tenant: of the tenants that proved they own it with a DNS TXT
// record, the one whose Route claimed it first.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=broute,categories=bex
// +kubebuilder:printcolumn:name="Hostname",type=string,JSONPath=`.spec.hostname`
// +kubebuilder:printcolumn:name="App",type=string,JSONPath=`.spec.appRef.name`
// +kubebuilder:printcolumn:name="TLS",type=string,JSONPath=`.spec.tls.mode`
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.conditions[?(@.type=="DomainVerified")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Route struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the tenant asks for.
	Spec RouteSpec `json:"spec"`

	// Status is what the Route controller observed.
	// +optional
	Status RouteStatus `json:"status,omitempty"`
}

// RouteSpec is the desired state of a Route.
type RouteSpec struct {
	// Hostname is the lowercase DNS name served, such as www.example.com,
	// or a wildcard such as *.example.com (only as the first label). It
	// cannot change.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^([*][.])?[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)+$')",message="must be a lowercase DNS name of at least two labels, such as www.example.com: labels of a-z, 0-9 and '-' that start and end with a letter or digit, separated by single dots; a wildcard is allowed only as a leading '*.'"
	// +kubebuilder:validation:XValidation:rule="self.split('.').all(l, l.size() <= 63)",message="each label must be at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cannot change: create a new Route for another hostname"
	Hostname string `json:"hostname"`

	// AppRef names the App, in the Route's namespace, that serves the
	// hostname.
	AppRef AppReference `json:"appRef"`

	// Process is the process of the App that receives the traffic.
	// +kubebuilder:default=web
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=22
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Process string `json:"process,omitempty"`

	// Port is the port of the process that receives the traffic; the
	// default is the process's PORT.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`

	// PathPrefix limits the Route to request paths under it. When several
	// Routes share a hostname pattern the longest prefix wins.
	// +kubebuilder:default="/"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must start with '/'"
	// +optional
	PathPrefix string `json:"pathPrefix,omitempty"`

	// TLS says how the hostname gets its certificate.
	// +kubebuilder:default={}
	// +optional
	TLS RouteTLS `json:"tls,omitempty"`
}

// AppReference names an App in the same namespace.
type AppReference struct {
	// Name is the App's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// RouteTLS is the TLS setting of a Route.
// +kubebuilder:validation:XValidation:rule="has(self.mode) && self.mode == 'Secret' ? has(self.secretName) : !has(self.secretName)",message="required when spec.tls.mode is Secret, and not allowed otherwise",fieldPath=".secretName"
type RouteTLS struct {
	// Mode is where the certificate comes from.
	// +kubebuilder:default=Auto
	// +optional
	Mode TLSMode `json:"mode,omitempty"`

	// SecretName is the kubernetes.io/tls Secret, in the Route's namespace,
	// that holds the certificate when Mode is Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// RouteStatus is the observed state of a Route.
type RouteStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready, Admitted, DomainVerified, CertificateReady and
	// DNSReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RouteList is a list of Routes.
// +kubebuilder:object:root=true
type RouteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Route `json:"items"`
}
