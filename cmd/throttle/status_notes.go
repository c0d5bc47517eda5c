package main

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/fleetquota/throttle/quota"
	"github.com/fleetquota/throttle/quota/redisstore"
)

// What status shows beside the limits: the pauses in force with why they
// were set, and the fleet's recent refusals. Both are read after the
// limits, in a round each: the reasons only when a pause is in force.

// pauseView is one pause in force (the schema is in the usage text).
type pauseView struct {
	Provider string `json:"provider"`
	// Tenant is the tenant's scope value (as rows show it) for a
	// tenant's own pause; "" for the provider's.
	Tenant string    `json:"tenant,omitempty"`
	Holds  string    `json:"holds"`
	Until  time.Time `json:"until"`
	// SetAt and Reason are what the pause recorded of itself (a vendor's
	// throttle, or "throttle pause" with who and why); null and "" when
	// it recorded nothing.
	SetAt  *time.Time `json:"set_at"`
	Reason string     `json:"reason"`

	key quota.PauseKey // where its note is
}

// refusalView is one provider's limit that refused requests in the last
// hour, as the fleet's RefusalLogs recorded them.
type refusalView struct {
	Provider     string     `json:"provider"`
	Limit        string     `json:"limit"`
	Last5Min     int64      `json:"last_5m"`
	LastHour     int64      `json:"last_hour"`
	Last         *time.Time `json:"last"`
	RetryAfterMS int64      `json:"retry_after_ms"`
}

// What each pause holds, as status says it.
const (
	holdsEvery      = "every request"
	holdsAllTenants = "every request, all tenants"
	holdsNoTenant   = "requests without a tenant"
	holdsTenant     = "the tenant's requests"
)

// pausesOf lists the pauses in force that groups (a refresh's, read) hold,
// per provider its pause of every tenant, its own pause, then its
// tenants' own, by scope value.
func pausesOf(groups []*group) []pauseView {
	var out []pauseView
	add := func(g *group, i int, tenant, holds string) {
		if i >= len(g.snap.Pauses) || i >= len(g.req.Pauses) || !g.snap.Pauses[i].After(g.snap.Now) {
			return
		}
		out = append(out, pauseView{Provider: g.p.Name, Tenant: tenant, Holds: holds, Until: g.snap.Pauses[i].UTC(),
			key: quota.PauseKey{Tag: g.req.Tag, Key: g.req.Pauses[i]}})
	}
	for _, g := range groups {
		_, tenants := g.p.TenantScope()
		switch {
		case g.part != "":
			add(g, 0, g.part, holdsTenant)
		case tenants:
			add(g, 1, "", holdsAllTenants)
			add(g, 0, "", holdsNoTenant)
		default:
			add(g, 0, "", holdsEvery)
		}
	}
	return out
}

// notePauses sets the pauses' reasons, in one round: a note counts only
// when it was written with the pause in force (its end is the pause's).
func (w *watcher) notePauses(ctx context.Context, pauses []pauseView) error {
	if len(pauses) == 0 {
		return nil
	}
	keys := make([]quota.PauseKey, len(pauses))
	for i, p := range pauses {
		keys[i] = p.key
	}
	notes, err := w.e.store.PauseNotes(ctx, keys)
	if err != nil {
		return err
	}
	for i, n := range notes {
		if n.Reason != "" && n.Until.Equal(pauses[i].Until) {
			pauses[i].Reason, pauses[i].SetAt = n.Reason, timePtr(n.Set)
		}
	}
	return nil
}

// refusals reads the fleet's recent refusals of the providers shown, by
// each limit and by a pause: those of the last hour, most in the last
// five minutes first.
func (w *watcher) refusals(ctx context.Context) ([]refusalView, error) {
	var keys []redisstore.RefusalKey
	for _, p := range w.provs {
		seen := map[string]bool{"pause": true}
		keys = append(keys, redisstore.RefusalKey{Provider: p.Name, Limit: "pause"})
		for _, l := range allLimits(p) {
			if name := l.lim.Quota.Name; !seen[name] {
				seen[name] = true
				keys = append(keys, redisstore.RefusalKey{Provider: p.Name, Limit: name})
			}
		}
	}
	_, rs, err := w.e.store.Refusals(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := []refusalView{}
	for i := range rs {
		r := &rs[i]
		if r.Within(60) == 0 && r.Last.IsZero() {
			continue
		}
		out = append(out, refusalView{Provider: r.Provider, Limit: r.Limit, Last5Min: r.Within(5), LastHour: r.Within(60),
			Last: timePtr(r.Last), RetryAfterMS: ceilMS(r.RetryAfter)})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Last5Min > out[b].Last5Min })
	return out, nil
}

// annotate adds to v the pauses in force that groups hold, with their
// reasons, and the recent refusals. The refusals' record lives in a tag
// of its own, which a user whose ACL names the providers' keys alone may
// not read: that failure is shown in the view, not the refresh's.
func (w *watcher) annotate(ctx context.Context, v *view, groups []*group) error {
	v.Pauses = pausesOf(groups)
	if err := w.notePauses(ctx, v.Pauses); err != nil {
		return err
	}
	var err error
	if v.Refusals, err = w.refusals(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		v.RefusalsError = err.Error()
	}
	return nil
}

// refusalNote says why the table lists no refusals when they could not
// be read, or "".
func refusalNote(v *view) string {
	if v.RefusalsError == "" {
		return ""
	}
	return "Recent refusals could not be read: " + v.RefusalsError
}

// refusalRows lists the recent refusals (view.Refusals), headings first.
func refusalRows(v *view) [][]string {
	rows := [][]string{{"REFUSED", "LIMIT", "COUNT", "LATEST"}}
	for _, r := range v.Refusals {
		latest := ""
		if r.Last != nil {
			latest = fmt.Sprintf("%s ago, told to retry in %s", humanDuration(v.Now.Sub(*r.Last)),
				humanDuration(time.Duration(r.RetryAfterMS)*time.Millisecond))
		}
		n := fmt.Sprintf("%s in 5 min, %s in 1h", count(r.Last5Min), count(r.LastHour))
		rows = append(rows, []string{r.Provider, r.Limit, n, latest})
	}
	return rows
}

// closeRefusals writes what the proxy's refusal log holds as the proxy
// stops, bounded by timeout: a failure loses the last interval's
// refusals from the fleet's record, which is worth a warning, not an
// exit code.
func closeRefusals(l *redisstore.RefusalLog, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		log.Warn("throttle: the last refusals were not recorded for status", "error", err.Error())
	}
}
