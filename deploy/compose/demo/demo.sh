#!/bin/sh
# Demo traffic of the compose stack (the image's "demo" stage, busybox): print
# every reply record as it arrives, send sample events to the three input
# topics, and keep printing. Watch it with `docker compose logs -f demo`.
#
# Needs LOYALTY_BRIDGE_BROKERS and LOYALTY_BRIDGE_SCHEMA_REGISTRY_URL, read by
# `loyalty-bridge produce` and `tail`.
set -eu

run=$(date +%s)
events=/demo/events

# produce TOPIC FILE [FLAGS...]: FILE's events with @RUN@ made unique to this run.
produce() {
	topic=$1 file=$2
	shift 2
	sed "s/@RUN@/$run/g" "$events/$file" | loyalty-bridge produce --topic "$topic" "$@"
}

for input in loyalty.purchase loyalty.refund-redemption loyalty.member-onboarding; do
	for reply in result error; do
		loyalty-bridge tail --topic "$input.$reply" --from-beginning &
	done
done

produce loyalty.purchase purchases.jsonl
produce loyalty.purchase invalid.jsonl --no-validate
produce loyalty.member-onboarding members.jsonl
# A refund whose purchase is still in flight would be answered
# ORIGINAL_NOT_FOUND: give the bridge a moment with the purchases first.
sleep 5
produce loyalty.refund-redemption refunds.jsonl

echo "demo: run $run sent; replies follow (Ctrl-C leaves the stack running)" >&2
wait
