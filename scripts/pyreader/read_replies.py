#!/usr/bin/env python3
"""Read loyalty-bridge reply topics the way an analytics team would.

A second, independent client for the bridge's reply records: librdkafka
(confluent-kafka) with isolation.level=read_committed, the key read with
StringDeserializer (UTF-8, the transactionId per DESIGN.md) and the value
with Confluent's own AvroDeserializer, which fetches the writer schema by
the id in the record from the Schema Registry. Nothing here knows the
bridge's schemas: what it prints is what any such consumer gets.

    read_replies.py --brokers HOST:PORT --registry URL [--count N]
                    [--timeout SECONDS] TOPIC...

Every partition of every TOPIC is assigned and read from its beginning,
with no group membership and no offset commit (librdkafka still wants a
group.id: a random one is made up), until N records are read and every
partition is at its end (for read_committed, the last stable offset), or
the timeout passes. The script needs its venv: scripts/pyreader/venv
prints that venv's python.
Each record is one JSON line on stdout:

    {"topic", "partition", "offset", "timestamp" (ms), "key",
     "headers": [{"key", "value"} or {"key", "value_b64"}],
     "value": the decoded record}

or, when the record could not be decoded, "error" in place of "value".
Values keep the types the deserializer returned: JSON null, booleans,
numbers and strings as such, bytes as {"$bytes": base64}, datetimes as
{"$datetime": isoformat} and any other type as {"$type": name,
"repr": repr}, so a reader can tell what a Python consumer really holds.

Exit status: 0 when done, 1 on a usage or client error, 2 when the timeout
passed first, 3 when a record could not be decoded (every record is still
printed).
"""

import argparse
import base64
import datetime
import json
import sys
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext, StringDeserializer


def tagged(v):
    """A JSON-ready copy of a deserialized value that keeps its Python type."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, dict):
        return {k: tagged(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [tagged(x) for x in v]
    if isinstance(v, bytes):
        return {"$bytes": base64.b64encode(v).decode("ascii")}
    if isinstance(v, datetime.datetime):
        return {"$datetime": v.isoformat()}
    return {"$type": type(v).__name__, "repr": repr(v)}


def header(k, v):
    if v is None:
        return {"key": k, "value": None}
    try:
        return {"key": k, "value": v.decode("utf-8")}
    except UnicodeDecodeError:
        return {"key": k, "value_b64": base64.b64encode(v).decode("ascii")}


def partitions(consumer, topics, timeout):
    md = consumer.list_topics(timeout=timeout)
    out = []
    for t in topics:
        tm = md.topics.get(t)
        if tm is None or tm.error is not None or not tm.partitions:
            raise KafkaException(f"topic {t}: not in the cluster's metadata ({tm.error if tm else 'unknown'})")
        out += [TopicPartition(t, p, OFFSET_BEGINNING) for p in sorted(tm.partitions)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", required=True, help="bootstrap servers, comma separated")
    ap.add_argument("--registry", required=True, help="Schema Registry URL")
    ap.add_argument("--count", type=int, default=0, help="records to read before stopping at the partitions' ends")
    ap.add_argument("--timeout", type=float, default=60, help="seconds before giving up")
    ap.add_argument("topics", nargs="+")
    args = ap.parse_args()
    deadline = time.monotonic() + args.timeout

    registry = SchemaRegistryClient({"url": args.registry})
    value_of = AvroDeserializer(registry)
    key_of = StringDeserializer("utf_8")
    consumer = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": f"read_replies-{uuid.uuid4()}",
        # librdkafka's default too; said here because it is the point.
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "enable.auto.commit": False,
    })
    try:
        tps = partitions(consumer, args.topics, max(1.0, deadline - time.monotonic()))
        consumer.assign(tps)
        at_end = {(tp.topic, tp.partition): False for tp in tps}
        read = failed = 0
        while read < args.count or not all(at_end.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                behind = sorted(f"{t}/{p}" for (t, p), end in at_end.items() if not end)
                print(f"read_replies: timeout: {read} of {args.count} records read; not at the end of {behind}",
                      file=sys.stderr)
                return 2
            msg = consumer.poll(min(left, 0.5))
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end[(msg.topic(), msg.partition())] = True
                    continue
                raise KafkaException(msg.error())
            at_end[(msg.topic(), msg.partition())] = False
            read += 1
            headers = msg.headers() or []
            line = {
                "topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
                "timestamp": msg.timestamp()[1],
                "headers": [header(k, v) for k, v in headers],
            }
            try:
                line["key"] = key_of(msg.key(), SerializationContext(msg.topic(), MessageField.KEY, headers))
                line["value"] = tagged(value_of(msg.value(), SerializationContext(msg.topic(), MessageField.VALUE, headers)))
            except Exception as e:  # any deserializer failure is a finding, reported per record
                failed += 1
                line["error"] = f"{type(e).__name__}: {e}"
            print(json.dumps(line, ensure_ascii=False), flush=True)
        return 3 if failed else 0
    except KafkaException as e:
        print(f"read_replies: {e}", file=sys.stderr)
        return 1
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
