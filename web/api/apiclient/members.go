package apiclient

import (
	"context"
	"net/http"
	"time"
)

// Member is a user of the tenant and their role.
type Member struct {
	Email string `json:"email"`
	// Role is viewer, developer or admin.
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
	// You is true for the member whose token asked.
	You bool `json:"you"`
}

// InviteRequest is the body of POST /api/v1/members.
type InviteRequest struct {
	Email string `json:"email"`
	// Role is viewer, developer or admin.
	Role string `json:"role"`
}

// Invitation is an invitation to join the tenant.
type Invitation struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Role  string `json:"role"`
	// Prefix is the code's first characters, to tell invitations apart.
	Prefix    string    `json:"prefix"`
	InvitedBy string    `json:"invitedBy"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Code is the single-use code the invitee accepts the invitation
	// with (POST /api/v1/invitations/accept, bex login --invite, or the
	// dashboard's /join page); answered once, when the invitation is made.
	Code string `json:"code,omitempty"`
}

// SetRoleRequest is the body of PATCH /api/v1/members/{email}.
type SetRoleRequest struct {
	Role string `json:"role"`
}

// AcceptInvitationRequest is the body of POST /api/v1/invitations/accept.
type AcceptInvitationRequest struct {
	Code string `json:"code"`
	// TokenName names the member's first token; default "first token".
	TokenName string `json:"tokenName,omitempty"`
}

// AcceptedInvitation answers POST /api/v1/invitations/accept: the new
// member and the secret of their first API token, answered once.
type AcceptedInvitation struct {
	Tenant string `json:"tenant"`
	Email  string `json:"email"`
	Role   string `json:"role"`
	// Token is the secret of the member's first token (scope full, no
	// expiry): they sign in with it, and make others with it.
	Token     string `json:"token"`
	TokenName string `json:"tokenName"`
}

// Token is an API token, never with its secret.
type Token struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Prefix is the secret's first characters, to tell tokens apart.
	Prefix string `json:"prefix"`
	// Scope is read, write or full: what the token may do at most, below
	// its member's role.
	Scope string `json:"scope"`
	// User is the member who owns the token; empty for a machine token.
	User       string     `json:"user,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	// ExpiresAt is when it ends; none for a token that does not expire.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Expired is true once ExpiresAt has passed: it is refused.
	Expired bool `json:"expired"`
	// Current is true for the token that asked (or whose session did).
	Current bool `json:"current"`
}

// CreateTokenRequest is the body of POST /api/v1/tokens.
type CreateTokenRequest struct {
	// Name is 1 to 64 characters.
	Name string `json:"name"`
	// Scope is read, write or full (the default).
	Scope string `json:"scope,omitempty"`
	// ExpiresAt ends the token, at most a year ahead; none: it does not
	// expire.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// CreatedToken answers POST /api/v1/tokens: the token and its secret,
// answered once.
type CreatedToken struct {
	Token  Token  `json:"token"`
	Secret string `json:"secret"`
}

// ListMembers returns the tenant's members.
func (c *Client) ListMembers(ctx context.Context) ([]Member, error) {
	var ms []Member
	return ms, c.call(ctx, http.MethodGet, "/members", nil, nil, &ms)
}

// Invite invites an email to the tenant with a role; the answer holds the
// invitation's code.
func (c *Client) Invite(ctx context.Context, req InviteRequest) (Invitation, error) {
	var inv Invitation
	return inv, c.call(ctx, http.MethodPost, "/members", nil, req, &inv)
}

// SetMemberRole gives the member with the email another role.
func (c *Client) SetMemberRole(ctx context.Context, email, role string) (Member, error) {
	var m Member
	return m, c.call(ctx, http.MethodPatch, "/members/"+seg(email), nil, SetRoleRequest{Role: role}, &m)
}

// RemoveMember removes the member with the email from the tenant.
func (c *Client) RemoveMember(ctx context.Context, email string) error {
	return c.call(ctx, http.MethodDelete, "/members/"+seg(email), nil, nil, nil)
}

// ListInvitations returns the tenant's pending invitations.
func (c *Client) ListInvitations(ctx context.Context) ([]Invitation, error) {
	var invs []Invitation
	return invs, c.call(ctx, http.MethodGet, "/invitations", nil, nil, &invs)
}

// RevokeInvitation ends a pending invitation.
func (c *Client) RevokeInvitation(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/invitations/"+seg(id), nil, nil, nil)
}

// AcceptInvitation accepts an invitation by its code; it needs no token.
func (c *Client) AcceptInvitation(ctx context.Context, req AcceptInvitationRequest) (AcceptedInvitation, error) {
	var a AcceptedInvitation
	return a, c.call(ctx, http.MethodPost, "/invitations/accept", nil, req, &a)
}

// ListTokens returns the tokens the caller may see: their own, or every
// token of the tenant for an admin.
func (c *Client) ListTokens(ctx context.Context) ([]Token, error) {
	var ts []Token
	return ts, c.call(ctx, http.MethodGet, "/tokens", nil, nil, &ts)
}

// CreateToken makes a token of the caller's; the answer holds its secret.
func (c *Client) CreateToken(ctx context.Context, req CreateTokenRequest) (CreatedToken, error) {
	var t CreatedToken
	return t, c.call(ctx, http.MethodPost, "/tokens", nil, req, &t)
}

// RevokeToken revokes a token by its ID.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/tokens/"+seg(id), nil, nil, nil)
}
