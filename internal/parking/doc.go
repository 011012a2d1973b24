// Package parking is the shape of a parked record: a refund whose original
// purchase the partner does not know yet, set aside on a topic of its own
// (by default <group>.parked) so that its input partition goes on, and
// brought back after a delay.
//
// A parked record is the input record unchanged (key, value, headers) plus
// the parking headers (Header*): the original record's position and
// timestamp, when it was first parked, when it is due again and how often
// it was parked. The bridge consumes the parked topic in the same group as
// its inputs and handles a parked record as its original, at its original
// position (Parked.Original), once it is due. Park builds the record;
// Parse reads one back and refuses a record whose headers are missing,
// malformed or too long (a *HeaderError): it never guesses a position.
//
// The topic (TopicConfig, Ensure) is plain delete retention, never
// compacted: parked records are keyed by the input's key, and compaction
// would keep one refund per key. It is kept at least MinRetention, longer
// than any refund waits, so a bridge that is down for a while loses none.
//
// The package decides nothing about refunds or the partner and logs
// nothing: the bridge (internal/bridge) parks and unparks, the service
// (internal/service) creates the topic.
package parking
