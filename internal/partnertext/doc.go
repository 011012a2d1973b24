// Package partnertext makes the partner API's own words safe to publish.
//
// Everything the partner answers is untrusted: its envelope message,
// errors.message, errors.code, errorCode and name, data.resultUrl, and the
// identifiers and statuses of its answers. A partner may echo the bearer
// token of the request, a query string with an access_token, a client
// secret, control characters that forge lines in a log, or a stack trace of
// any length. A Scrubber turns such a text into one that can go on a Kafka
// topic: token shapes and secret key=value pairs become events.Redacted,
// control and format characters go, the length is capped, and a URL loses
// its userinfo, fragment and every query parameter the partner profile does
// not name.
//
// The package owns the shapes of secrets in free text and the caps. It does
// not know which text is personal data: a Scrubber is handed that as a
// function (internal/personalmatch builds one per onboarding event), and it
// does not decide which fields an event carries; internal/bridge does.
package partnertext
