package hetzner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// Account reads what a Hetzner Cloud project offers.
type Account struct {
	client *hcloud.Client
	now    func() time.Time
}

// NewAccount returns an Account over client.
func NewAccount(client *hcloud.Client) (*Account, error) {
	if client == nil {
		return nil, errors.New("hetzner: no hcloud client")
	}
	return &Account{client: client, now: time.Now}, nil
}

// Surge is whether the project can create one more server of a type in a
// location, as far as the API says. The API exposes availability,
// deprecation and prices, not the project's server limit: a project at its
// limit shows up only as resource_limit_exceeded when the server is
// created.
type Surge struct {
	ServerType string
	Location   string
	// Available is true when the type exists, is offered in the location
	// and is not past its deprecation's unavailable-after date.
	Available bool
	// Message says what was found, in words for an operator.
	Message string
	// Deprecated is true when the type is deprecated in the location;
	// UnavailableAfter is then when it stops being orderable.
	Deprecated       bool
	UnavailableAfter time.Time
	// PriceHourly and PriceMonthly are the type's prices in the location,
	// when the API lists them.
	PriceHourly, PriceMonthly hcloud.Price
}

// SurgeCapacity reports whether one more server of serverType (such as
// "cx32") can be created in location (such as "fsn1"). A type or location
// that does not exist is an answer (Available false), not an error; errors
// are failed API calls.
func (a *Account) SurgeCapacity(ctx context.Context, serverType, location string) (Surge, error) {
	out := Surge{ServerType: serverType, Location: location}
	st, _, err := a.client.ServerType.GetByName(ctx, serverType)
	if err != nil {
		return out, fmt.Errorf("reading server type %s: %w", serverType, err)
	}
	if st == nil {
		out.Message = fmt.Sprintf("server type %s does not exist", serverType)
		return out, nil
	}
	loc, _, err := a.client.Location.GetByName(ctx, location)
	if err != nil {
		return out, fmt.Errorf("reading location %s: %w", location, err)
	}
	if loc == nil {
		out.Message = fmt.Sprintf("location %s does not exist", location)
		return out, nil
	}
	for _, p := range st.Pricings {
		if p.Location != nil && p.Location.Name == location {
			out.PriceHourly, out.PriceMonthly = p.Hourly, p.Monthly
		}
	}
	var offered *hcloud.ServerTypeLocation
	for i := range st.Locations {
		if l := st.Locations[i].Location; l != nil && l.Name == location {
			offered = &st.Locations[i]
		}
	}
	switch {
	case offered == nil:
		out.Message = fmt.Sprintf("server type %s is not offered in %s", serverType, location)
	case offered.IsDeprecated() && !a.now().Before(offered.UnavailableAfter()):
		out.Deprecated, out.UnavailableAfter = true, offered.UnavailableAfter()
		out.Message = fmt.Sprintf("server type %s is deprecated in %s and unavailable since %s", serverType, location, out.UnavailableAfter.Format(time.DateOnly))
	case !offered.Available:
		out.Message = fmt.Sprintf("server type %s is out of stock in %s", serverType, location)
	default:
		out.Available = true
		out.Message = fmt.Sprintf("server type %s is available in %s", serverType, location)
		if offered.IsDeprecated() {
			out.Deprecated, out.UnavailableAfter = true, offered.UnavailableAfter()
			out.Message += fmt.Sprintf(" (deprecated: unavailable after %s)", out.UnavailableAfter.Format(time.DateOnly))
		}
		if out.PriceHourly.Net != "" {
			out.Message += fmt.Sprintf(", %s net per hour", out.PriceHourly.Net)
		}
	}
	return out, nil
}
