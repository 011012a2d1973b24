// Package produce turns JSON lines into Avro records on an input topic: the
// way an upstream team feeds the bridge by hand (loyalty-bridge produce).
//
// A line is one event: a JSON object with the Avro field names, timestamps
// as RFC 3339 strings, and on a topic with several event types a "type"
// field naming the record. ParseLine reads one line into an event and its
// record key; Run reads a whole stream, validates and encodes each event
// with the codec and sends it with the Kafka client it is given, and counts
// what was sent and what failed. A bad line fails alone: Run reports it as
// a *LineError and goes on.
//
// Errors name the line and the field, never a value, which may be personal
// data. The package does not build clients or read configuration; it does
// not consume, and knows nothing of the partner API.
package produce
