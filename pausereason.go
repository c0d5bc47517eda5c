package throttle

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fleetquota/throttle/backoff"
)

// Why the transport paused a scope, as the store records it beside the
// pause for operators (quota.ReasonPauser; throttle status shows it). A
// reason names the response's status, the vendor's host and the delay's
// source: never a path, a query or a header's value other than the delay,
// which could carry a tenant's data or a credential.

// throttledReason says why a throttled response from host, classified
// as v, paused its scope for d.
func throttledReason(host string, status int, v backoff.Verdict, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d from %s, ", status, host)
	if v.Source == "" {
		fmt.Fprintf(&b, "no delay given: paused %s (the default)", shortDuration(d))
	} else {
		fmt.Fprintf(&b, "%s %s", v.Source, shortDuration(d))
	}
	if v.Global {
		b.WriteString(" (the account's global limit)")
	}
	return b.String()
}

// countersReason says why a response from host whose counters say none
// remain paused its scope for d.
func countersReason(host string, status int, d time.Duration) string {
	return fmt.Sprintf("%d from %s, its counters say none remain: paused %s, until their reset", status, host, shortDuration(d))
}

// responseHost is the host resp answered for, or "the vendor" when the
// round tripper left its Request unset.
func responseHost(resp *http.Response) string {
	if resp.Request == nil || resp.Request.URL == nil {
		return "the vendor"
	}
	return resp.Request.URL.Host
}

// shortDuration writes d as a person reads it: 30s, 1.5s, 2m, 1h30m.
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Minute:
		d = d.Round(time.Second)
	case d >= time.Second:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Millisecond)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
