// Package hostile builds the input records someone who may write an input
// topic can send to make the bridge stop or burn CPU: header floods, keys
// and values at Kafka's limits, every header at its own limit, JSON nested
// past the validator's depth, bytes that are no Avro.
//
// Tests of whole paths (the bridge's Handle, the service over Kafka) and
// the bridge's benchmarks share these, so that the record the security
// review found (40,000 empty correlation-id headers) and its relatives are
// tried everywhere the same way. It builds records only; it does not
// produce them and holds no state.
package hostile
