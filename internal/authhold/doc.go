// Package authhold holds the bridge's records while the partner refuses its
// credentials.
//
// A refused credential (loyalty.IsCredentialRefused: the token grant
// refused, or a 401 to a freshly renewed token) is not a record's failure:
// every record would fail the same way until an operator fixes the secret.
// Reporting each as an AUTH error event would be an error storm that must
// all be replayed. Instead, the first refused attempt puts the Hold in the
// held state (one log line, a gauge), and every attempt then waits in
// Admit, as the circuit breaker makes attempts wait while the API is down.
//
// While held, one waiting attempt at a time probes: it asks the token
// source for a token and, when one is obtained, makes its attempt. A probe
// is cheap: the tokensource.Cache backs off refused grants for minutes, so
// most probes only hear the back-off, and a refused password is not
// retried by every record or every few seconds and cannot lock the
// account; but a probe also has the cache stat the secret files, so a
// rewritten password file is tried at the next probe, within MaxBackoff. An attempt that is
// not refused ends the hold (one log line) and releases every waiter; a
// refused one doubles the time to the next probe, up to MaxBackoff. Held
// attempts do not spend their record's retry budget.
//
// The Hold is also a pipeline Gate: while held, dispatch waits as long as
// some record is already waiting in the hold, so the pipeline does not
// feed records into it at full speed. Health reports the held state for
// /readyz.
//
// The package owns the held state only. It classifies errors with
// loyalty.IsCredentialRefused, knows nothing of Kafka, and never sees a
// secret: the token source does.
package authhold
