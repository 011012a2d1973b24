// Package telemetry owns what operators see of a running bridge: Prometheus
// metrics (names are a contract: alerts and dashboards in deploy/ are built
// on them), the /metrics, /healthz and /readyz endpoints, and the zap logger
// with redaction built in.
//
// Redaction lives in the logger itself rather than at call sites: a field
// whose key names a secret or a personal datum, or a string value that looks
// like a bearer token or JWT, is replaced by events.Redacted before any
// encoder sees it. The personal-data keys are events.PersonalFields (the one
// list); this package adds only the secrets. Call sites still must not log
// record values; redaction is the net under that rule, not a licence to
// break it.
//
// /readyz answers each check's name and state ("registry: failing"),
// never its error: the errors carry peers' text, and the port is open to
// whatever reaches the pod. A check's detail is logged when its state
// changes, not per probe. A check that asks a peer is wrapped in Shared,
// so that probes, however many and however often, cost the peer one
// request per TTL. The server bounds header size and every timeout.
//
// API calls are labelled by the endpoint the caller names in the request's
// context (internal/apiendpoint), never by parsing the URL; token grants are
// counted by the token cache (Metrics.TokenGrant), not by the transport.
//
// API call latencies carry the trace id of a sampled call as their
// exemplar (served in the OpenMetrics format to a scraper that asks for
// it), so a dashboard can go from a slow bucket to its trace.
//
// telemetry depends on no other bridge package but internal/events (that
// list and marker) and internal/apiendpoint; the bridge feeds it through the
// small methods of Metrics.
package telemetry
