// Package demo makes the sample traffic of `loyalty-bridge dev --demo N` and
// counts what comes back.
//
// Plan returns N input records spread over the three input topics the way a
// commerce platform would send them: mostly purchases, then redemptions,
// member commands (an onboarding, link and unlink sequences that include a
// repeated link and a repeated unlink, so the link-state outcomes show), a
// few invalid events and a few undecodable values. Refunds of earlier
// purchases are a second phase: a refund travels on another topic than its
// purchase, so Kafka gives no order between them, and a refund sent with its
// purchase could overtake it and wait, parked, for its purchase (dev parks
// for seconds, not the live default's minutes).
//
// Tally reads reply records and counts, per input topic, each outcome and
// error category, and which planned transactions got their terminal output.
//
// Run drives a demo against a bridge someone else runs: it produces the
// plan to the input topics, tallies the reply topics, shows progress with
// package progress and prints the table and verdict.
//
// demo talks to Kafka through the brokers it is given and encodes with the
// codec it is given; it does not start the cluster, registry, simulator or
// bridge (internal/devstack and the dev command do), and it never calls the
// partner API.
//
// The personal data in sample onboardings is made up (a fixed fake name,
// phone and ID); it still travels only inside Avro values.
package demo
