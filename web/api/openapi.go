package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

// schemaTypes are the JSON types of the API, by the name the route table
// uses; their OpenAPI schemas are made from the Go types, so that the
// document cannot drift from what the server sends.
var schemaTypes = map[string]reflect.Type{
	"Error":                     reflect.TypeFor[apiclient.ErrorBody](),
	"Health":                    reflect.TypeFor[apiclient.Health](),
	"WhoAmI":                    reflect.TypeFor[apiclient.WhoAmI](),
	"CreateSessionRequest":      reflect.TypeFor[apiclient.CreateSessionRequest](),
	"Session":                   reflect.TypeFor[apiclient.Session](),
	"Tenant":                    reflect.TypeFor[apiclient.Tenant](),
	"CreateTenantRequest":       reflect.TypeFor[apiclient.CreateTenantRequest](),
	"CreatedTenant":             reflect.TypeFor[apiclient.CreatedTenant](),
	"App":                       reflect.TypeFor[apiclient.App](),
	"CreateAppRequest":          reflect.TypeFor[apiclient.CreateAppRequest](),
	"UpdateAppRequest":          reflect.TypeFor[apiclient.UpdateAppRequest](),
	"Build":                     reflect.TypeFor[apiclient.Build](),
	"Release":                   reflect.TypeFor[apiclient.Release](),
	"ReleaseInfo":               reflect.TypeFor[apiclient.ReleaseInfo](),
	"Instances":                 reflect.TypeFor[apiclient.Instances](),
	"AppMetrics":                reflect.TypeFor[apiclient.AppMetrics](),
	"RollbackRequest":           reflect.TypeFor[apiclient.RollbackRequest](),
	"Rollback":                  reflect.TypeFor[apiclient.Rollback](),
	"EnvVar":                    reflect.TypeFor[apiclient.EnvVar](),
	"PatchEnvRequest":           reflect.TypeFor[apiclient.PatchEnvRequest](),
	"RestartRequest":            reflect.TypeFor[apiclient.RestartRequest](),
	"Restart":                   reflect.TypeFor[apiclient.Restart](),
	"ScaleRequest":              reflect.TypeFor[apiclient.ScaleRequest](),
	"Scale":                     reflect.TypeFor[apiclient.Scale](),
	"RunRequest":                reflect.TypeFor[apiclient.RunRequest](),
	"Run":                       reflect.TypeFor[apiclient.Run](),
	"RunExit":                   reflect.TypeFor[apiclient.RunExit](),
	"TerminalSize":              reflect.TypeFor[apiclient.TerminalSize](),
	"LogLine":                   reflect.TypeFor[apiclient.LogLine](),
	"SSHKey":                    reflect.TypeFor[apiclient.SSHKey](),
	"AddSSHKeyRequest":          reflect.TypeFor[apiclient.AddSSHKeyRequest](),
	"Route":                     reflect.TypeFor[apiclient.Route](),
	"AddRouteRequest":           reflect.TypeFor[apiclient.AddRouteRequest](),
	"UpgradePlanRequest":        reflect.TypeFor[apiclient.UpgradePlanRequest](),
	"UpgradePlan":               reflect.TypeFor[apiclient.UpgradePlan](),
	"CreateUpgradeRequest":      reflect.TypeFor[apiclient.CreateUpgradeRequest](),
	"Upgrade":                   reflect.TypeFor[apiclient.Upgrade](),
	"UpgradeChange":             reflect.TypeFor[apiclient.UpgradeChange](),
	"FleetCluster":              reflect.TypeFor[apiclient.FleetCluster](),
	"CreateLocalClusterRequest": reflect.TypeFor[apiclient.CreateLocalClusterRequest](),
	"LocalCluster":              reflect.TypeFor[apiclient.LocalCluster](),
	"LocalClusterDeletion":      reflect.TypeFor[apiclient.LocalClusterDeletion](),
	"ClusterCordon":             reflect.TypeFor[apiclient.ClusterCordon](),
	"AuditEntry":                reflect.TypeFor[apiclient.AuditEntry](),
	"Quota":                     reflect.TypeFor[apiclient.Quota](),
	"QuotaOverrides":            reflect.TypeFor[apiclient.QuotaOverrides](),
	"QuotaPatch":                reflect.TypeFor[apiclient.QuotaPatch](),

	"Member":                  reflect.TypeFor[apiclient.Member](),
	"InviteRequest":           reflect.TypeFor[apiclient.InviteRequest](),
	"Invitation":              reflect.TypeFor[apiclient.Invitation](),
	"SetRoleRequest":          reflect.TypeFor[apiclient.SetRoleRequest](),
	"AcceptInvitationRequest": reflect.TypeFor[apiclient.AcceptInvitationRequest](),
	"AcceptedInvitation":      reflect.TypeFor[apiclient.AcceptedInvitation](),
	"Token":                   reflect.TypeFor[apiclient.Token](),
	"CreateTokenRequest":      reflect.TypeFor[apiclient.CreateTokenRequest](),
	"CreatedToken":            reflect.TypeFor[apiclient.CreatedToken](),
}

// obj is a JSON object of the document.
type obj = map[string]any

func (s *Server) openAPI(c echo.Context) error {
	return c.JSON(http.StatusOK, s.OpenAPI())
}

// echoParam matches echo's :param path segments.
var echoParam = regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)

// OpenAPIPath turns an echo route path into an OpenAPI path template.
func OpenAPIPath(echoPath string) string { return echoParam.ReplaceAllString(echoPath, "{$1}") }

// OpenAPI returns the OpenAPI 3 document of the API, made from the routes
// the server registers.
func (s *Server) OpenAPI() map[string]any {
	schemas := obj{}
	for name, t := range schemaTypes {
		schemas[name] = schemaOf(t)
	}
	schemas["OpenAPIDocument"] = obj{"type": "object", "description": "An OpenAPI 3 document.", "additionalProperties": true}
	paths := obj{}
	for _, r := range s.routes {
		p := OpenAPIPath(Prefix + r.path)
		item, _ := paths[p].(obj)
		if item == nil {
			item = obj{}
			paths[p] = item
		}
		item[strings.ToLower(r.method)] = operation(r)
	}
	return obj{
		"openapi": "3.0.3",
		"info": obj{
			"title":       "bex platform API",
			"version":     "v1",
			"description": "Apps, builds, releases, env, logs, custom hostnames (routes), SSH keys, members, invitations and tokens of a tenant; tenants, the fleet and its upgrades for operators. Every route but healthz, openapi.json and invitations/accept needs Authorization: Bearer <token>. A tenant's route needs a role, said in its description and in x-bex-access (viewer, developer, admin): a token acts with its member's role (a machine token's is admin), narrowed by its scope. Errors are JSON {message, field, quota, role}.",
		},
		"paths": paths,
		"components": obj{
			"schemas": schemas,
			"securitySchemes": obj{
				"bearer": obj{"type": "http", "scheme": "bearer", "description": "An API token (bex_...)."},
			},
		},
	}
}

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

// operation is the OpenAPI operation of r.
func operation(r route) obj {
	op := obj{
		"summary":      r.summary,
		"operationId":  operationID(r),
		"description":  accessDescription(r.access),
		"x-bex-access": r.access.String(),
	}
	var params []any
	for _, m := range echoParam.FindAllStringSubmatch(r.path, -1) {
		params = append(params, obj{"name": m[1], "in": "path", "required": true, "schema": obj{"type": "string"}})
	}
	for _, q := range r.query {
		params = append(params, obj{"name": q.name, "in": "query", "description": q.description, "schema": obj{"type": q.typ}})
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if r.request != "" {
		op["requestBody"] = obj{
			"required": !r.requestOptional,
			"content":  obj{"application/json": obj{"schema": ref(r.request)}},
		}
	}
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	ok := obj{"description": http.StatusText(status)}
	switch {
	case r.response == "":
	case r.responseType == "text/plain":
		ok["content"] = obj{"text/plain": obj{"schema": obj{"type": "string"}}}
	case r.responseType != "":
		ok["content"] = obj{r.responseType: obj{"schema": ref(r.response)}}
	case strings.HasPrefix(r.response, "[]"):
		ok["content"] = obj{"application/json": obj{"schema": obj{"type": "array", "items": ref(strings.TrimPrefix(r.response, "[]"))}}}
	default:
		ok["content"] = obj{"application/json": obj{"schema": ref(r.response)}}
	}
	errAnswer := func(desc string) obj {
		return obj{"description": desc, "content": obj{"application/json": obj{"schema": ref("Error")}}}
	}
	responses := obj{strconv.Itoa(status): ok, "default": errAnswer("An error: 400 unreadable body, 401 no valid token, 403 wrong kind of token or a role below the one needed (role names it), 404 not found (also another tenant's), 409 taken, 422 invalid field, 501 not on this platform, 503 not ready.")}
	if r.accepted != "" {
		responses[strconv.Itoa(http.StatusAccepted)] = obj{"description": http.StatusText(http.StatusAccepted),
			"content": obj{"application/json": obj{"schema": ref(r.accepted)}}}
	}
	op["responses"] = responses
	if r.access != public {
		op["security"] = []any{obj{"bearer": []any{}}}
	}
	return op
}

// accessDescription says who may call a route of access a.
func accessDescription(a access) string {
	switch a {
	case public:
		return "Needs no token."
	case anyToken:
		return "Needs any valid token."
	case operator:
		return "Needs an operator's token."
	case tenantViewer:
		return "Needs a tenant's token: any member (viewer, developer or admin)."
	}
	return fmt.Sprintf("Needs a tenant's token that acts as a %s or more (a token's scope may narrow its member's role); less answers 403 with role: %s.", a.role(), a.role())
}

// operationID names an operation: its method and path, camel-cased.
func operationID(r route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.method))
	for _, part := range strings.FieldsFunc(r.path, func(c rune) bool { return c == '/' || c == '-' || c == '.' || c == ':' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

var (
	timeType = reflect.TypeFor[time.Time]()
	// rawType is JSON left as it is: any value.
	rawType = reflect.TypeFor[json.RawMessage]()
)

// schemaOf is the OpenAPI schema of the JSON encoding of t. Fields without
// omitempty are required; a field tagged `enum:"a,b,c"` takes only those
// values.
func schemaOf(t reflect.Type) obj {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case timeType:
		return obj{"type": "string", "format": "date-time"}
	case rawType:
		return obj{}
	}
	switch t.Kind() {
	case reflect.String:
		return obj{"type": "string"}
	case reflect.Bool:
		return obj{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return obj{"type": "integer"}
	case reflect.Slice:
		return obj{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Map:
		return obj{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.Struct:
		props := obj{}
		var required []string
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
				// An embedded struct's fields are the outer object's,
				// as encoding/json writes them.
				embedded := schemaOf(f.Type)
				maps.Copy(props, embedded["properties"].(obj))
				if r, ok := embedded["required"].([]string); ok {
					required = append(required, r...)
				}
				continue
			}
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			prop := schemaOf(f.Type)
			if enum := f.Tag.Get("enum"); enum != "" {
				prop["enum"] = strings.Split(enum, ",")
			}
			props[name] = prop
			if !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
		}
		s := obj{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return obj{}
}
