package proxy

import (
	"encoding/json"
	"net/http"
)

// The codes of the answers the proxy makes itself: the "error" field of
// the JSON body and the value of the Throttle-Error header.
const (
	codeLimited          = "limited"           // 429: the throttle refused the request
	codeStoreUnavailable = "store_unavailable" // 503: the store failed and the provider fails closed
	codeOverloaded       = "overloaded"        // 503: the bodies held in memory are at their bound
	codeMissingScope     = "missing_scope"     // 400: a limit with missing: refuse got no value
	codeBadRequest       = "bad_request"       // 400: a bad Throttle-* header, path, host or cost
	codeUnknownHost      = "unknown_host"      // 403: no provider claims the host
	codeNotFound         = "not_found"         // 404: no host or route in the path
	codeUpstreamError    = "upstream_error"    // 502: the request to the vendor failed
	codeUpstreamTimeout  = "upstream_timeout"  // 504: the vendor did not answer in time
)

// statusClientGone is reported (never sent) for a request whose client
// went away first, as nginx logs it.
const statusClientGone = 499

// answer is the JSON body of an answer the proxy makes itself.
type answer struct {
	Error    string `json:"error"`
	Message  string `json:"message"`
	Provider string `json:"provider,omitempty"`
	Limit    string `json:"limit,omitempty"`
	// Scope is set on refusals only: "" for a provider-wide limit.
	Scope        *string `json:"scope,omitempty"`
	RetryAfterMS int64   `json:"retry_after_ms,omitempty"`
	Host         string  `json:"host,omitempty"`
}

// fail answers with a JSON error and records the status.
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, provider string, status int, code, msg string, extra func(*answer)) {
	a := &answer{Error: code, Message: msg, Provider: provider}
	if extra != nil {
		extra(a)
	}
	p.write(w, status, a)
	if info := infoFrom(r.Context()); info != nil {
		info.status = status // reported when the reverse proxy returns
	} else {
		p.report(provider, status)
	}
}

func (p *Proxy) write(w http.ResponseWriter, status int, a *answer) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set(HeaderError, a.Error)
	w.WriteHeader(status)
	b, _ := json.Marshal(a) // strings and numbers only: cannot fail
	b = append(b, '\n')
	_, _ = w.Write(b)
}
