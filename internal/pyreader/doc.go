// Package pyreader holds a second, independent reader of the bridge's reply
// topics up against the bridge's own: it runs scripts/pyreader/read_replies.py
// (confluent-kafka, that is librdkafka, with isolation.level=read_committed
// and Confluent's AvroDeserializer fetching writer schemas from the Schema
// Registry) and says, field by field, where what it decoded differs from
// what franz-go and package codec read from the same record.
//
// The point is the wire format as analytics teams meet it. Our codec
// reading back what our codec wrote proves little about a reader that
// shares none of our code; this one shares none of it: another Kafka
// client, another Avro implementation (fastavro), another registry client.
//
// The model: Read runs the script once and returns one Record per record it
// printed, values as the Python deserializer typed them (see the script's
// doc for the JSON tags of bytes and datetimes). Compare holds one Record to
// the reference, a *kgo.Record and its value decoded by codec: key,
// timestamp, every header in order, and every field of the value, named by
// its Avro path (source.offset), with the Avro type the field must have
// come out as in Python (a long as an integer, timestamp-millis as a
// timezone-aware datetime, bytes as bytes, null as None).
//
// The Python interpreter is the one EnvPython names, normally the venv that
// scripts/pyreader/venv made with requirements.txt: Python skips a test when
// it is unset. The package starts no broker, runs no bridge and produces
// nothing; the tests that use it (internal/service) do.
package pyreader
