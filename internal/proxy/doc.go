// Package proxy is the core of "throttle proxy": a reverse proxy that
// sends every request through one throttle.Transport (and its retrying
// client), so that processes in any language draw from the same
// fleet-wide quota as the Go services, through the same Redis, with the
// same configuration and semantics. cmd/throttle wires it to flags,
// listeners, /healthz, /metrics and signals; docs/proxy.md is the
// operator's reference.
//
// # Requests
//
//	http://proxy/<host>/<path>?<query>   → https://<host>/<path>?<query>
//	http://proxy/<route>/<path>?<query>  → <route's base URL>/<path>?<query>
//
// Only hosts that a provider of the registry claims are forwarded; any
// other gets 403 and a JSON body (no open proxy). The /<host>/ form is
// always https, except for loopback hosts with Options.LoopbackHTTP; a
// route names its scheme. A route on a listener of its own (Upstream)
// forwards every path to its base URL.
//
// The per-request values come from headers, stripped before forwarding
// with every other Throttle-* header: Throttle-Business, Throttle-Label
// (name=value, comma-separated), Throttle-Cost, Throttle-Limit-Cost
// (limit=n, comma-separated), Throttle-Max-Wait, which can only
// shorten the provider's max_wait, and Throttle-Priority, the request's
// priority class. A value that does not parse, an unknown Throttle-*
// header, one given twice, a Throttle-Limit-Cost name that is not a
// limit of the request's stack, or a Throttle-Priority class that the
// provider does not declare is a 400 (a provider without classes
// ignores the class, as the library does). The headers
// are the client's assertions: a cost header can raise a configured cost
// but not lower it (unless Options.LowerCosts), and Options.Business
// binds every request to one business. No header names a plan: the
// business's plan comes from the registry's configuration (its tenants
// map, else the provider's default_plan), so a client cannot raise its
// own figures.
//
// # Answers of its own
//
// Every answer the proxy makes instead of forwarding the vendor's has
// Content-Type application/json, a Throttle-Error header equal to the
// body's "error" code, and a body
//
//	{"error": "limited", "message": "...", "provider": "github", "limit": "core", "scope": "acme", "retry_after_ms": 1200}
//
// with the codes: limited (429, with Retry-After in whole seconds),
// store_unavailable and overloaded (503), missing_scope and bad_request (400),
// unknown_host (403), not_found (404), upstream_error (502),
// upstream_timeout (504). A vendor's own answers, 429s included, pass
// through as they are, without Throttle-Error.
//
// # Forwarding
//
// httputil.ReverseProxy does the HTTP work: hop-by-hop headers (RFC 9110
// §7.6.1) are removed both ways; Forwarded and X-Forwarded-* are removed
// and none are set, so the vendor sees the proxy as its client; Host is
// the upstream's; Upgrade is dropped (no WebSocket); responses with
// Content-Type text/event-stream or no length are flushed as every chunk
// arrives. A vendor's redirect is never followed; its Location is pointed
// back through the proxy where the proxy can forward it.
//
// A request body of at most Options.MaxRetryBody bytes is held in memory,
// so that the retrying client can send it again after a vendor's 429. A
// larger body is streamed to the vendor as it arrives and sent once,
// throttled like any other but never retried: a vendor's 429 to it is
// passed back (and still pauses the scope fleet-wide). Options.MaxHeldBodies
// bounds the bytes held at once.
//
// # Retries
//
// Retries follow throttle.NewClient's rules (backoff.Policy) within the
// request's hold: every wait, for a slot or before a retry, ends within
// the request's max wait from when the proxy has it (headers and any
// held body); a retry that would start later
// is not made, and the vendor's answer goes back.
package proxy
