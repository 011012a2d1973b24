// Package reconcile compares what the bridge said it did with what the
// partner holds (loyalty-bridge reconcile): for a time window it reads the
// replies on the result and error topics of the input topics asked for,
// looks each accrual, redemption and refund transaction up once at the
// partner (lookup-transaction-id), and reports where they disagree.
//
// # Model
//
// Replies are read by record timestamp, from the first at or after Since
// up to the first at or after Until (the end when the run starts), with a
// client of its own: no consumer group, no commits, committed records
// only. They are gathered per transaction (input topic and
// transactionId); a transaction with a result is judged by its results,
// one with error events only by those (an attempt that failed before a
// replay succeeded says nothing more once the result is there). The input
// record each reply names is read too, for the member to ask about and
// the amounts to compare; when the topic no longer holds it, an original
// carried by an error event stands in (a lookup only reads), and a result
// still carries its loyaltyId.
//
// Findings, one per transaction (Differs: one per result that differs):
//
//   - Missing: a result says APPLIED or ALREADY_APPLIED and the partner
//     has no such transaction;
//   - NotApplied: a result says APPLIED or ALREADY_APPLIED and the
//     partner has the transaction with a failed status (the profile's
//     FailedStatuses): recorded, but it took no effect;
//   - Differs: the partner's points (transactionPoint) differ from the
//     result's (points; usedPoint for a redemption or a refund's
//     clawback), its transactionAmount from the input record's (amount;
//     refundAmount for a refund), its points from a redemption's usedPoint
//     asked for, or its bitReference from the result's;
//   - ErrorButApplied: only error events answer the transaction, and the
//     partner has it applied;
//   - NotRecognised: the partner's answer names an error code, a
//     transactionType or a status the partner profile does not; it is
//     neither "applied" nor "not found", and nothing is guessed;
//   - Unchecked: no answer (retries exhausted, credentials refused, an
//     answer that does not read), or nothing to ask with (no loyaltyId
//     anywhere).
//
// And, per original accrual whose clawback slots the window's refund
// results name (see Refunds):
//
//   - ClawbackOverEarned: the original's applied slots took more points
//     than it earned;
//   - SharedClawback: the results of two or more refunds name one slot.
//
// A run holds a few hundred bytes per transaction of its window until the
// lookups are done; Options.MaxTransactions bounds them, and a window that
// holds more fails before any lookup, asking for a narrower one.
//
// NO_OP results (a refund that claws back nothing) and replies to member
// commands (onboard, link, unlink) are counted as skipped, not checked:
// those have no transaction to look up.
//
// # Refunds
//
// A refund's clawback is a redemption on the partner's side, posted under
// a clawback slot of the original (<original>~cb<k>, the bridge's
// ClawbackID), not under the refund's id. It is looked up by the
// clawbackTransactionId of the refund's result; a result written before
// that field is looked up by its bitReference when it has one (the
// partner's own reference of what it applied), otherwise by the refund's
// transactionId, where clawbacks were posted before slots. Two results of
// one refund that name two clawbacks are Differs: the refund may have been
// clawed back twice. Error events carry neither, so a refund that failed
// is looked up by its transactionId: a clawback that its ambiguous write
// left in a slot is not found.
//
// No single result shows what all the clawbacks of one original took. So
// for every original named by a refund result's clawbackTransactionId
// (bridge.ClawbackSlot reads it), reconcile looks the original up (its
// transactionPoint is what it earned; nothing if the partner holds no
// applied accrual) and then its slots, <original>~cb1 onwards, until one
// is not found past the last slot any result names (at most
// bridge.MaxClawbacks), and sums the points of those applied (a slot with
// a failed status took no effect). Over what the original earned, it is
// ClawbackOverEarned, named by the original's transactionId. A slot named
// by the results of two refunds is SharedClawback, named by the slot's id:
// one clawback stands for several refunds, which is too little clawed back
// when a refund took an equal twin's clawback for its own, and too much
// when two processes wrote the slot at once at a partner that applies a
// repeated transactionId (its lookup shows one of the two, so the sum
// cannot see the second: the shared slot is the trace). One refund's
// results naming its own slot again (a replay's ALREADY_APPLIED) are
// neither. A lookup of an original that fails, or that the profile does
// not recognise, is Unchecked or NotRecognised for the original, said
// once when the original's own result already said it. These lookups run
// after the others, under the same Concurrency and Rate; Report.Originals
// counts the originals summed.
//
// # One reading of an answer
//
// What an answer means (the partner's "not found" codes, its transaction
// types, the statuses that count as applied or failed) is left open by the
// spec; the partner profile says it (Options.Profile), and
// loyalty.ClassifyLookup alone reads an answer through it, as the bridge's
// guard and refunds do, so that reconcile and the guard cannot disagree.
// Its verdicts: applied is compared with the replies; not found, and a
// record of the other kind (the transactionId names another transaction),
// are "no such transaction" (Missing against a result, agreement with
// error events); not applied is NotApplied against a result and agreement
// with error events. NotApplied is not Missing: the partner holds the
// transactionId, and whether it takes it again is the partner's to say,
// so a person looks before a replay. Failed is Unchecked, unrecognised
// NotRecognised.
//
// # What it does not own
//
// The package writes nothing: no reply records, no commits, no partner
// writes. It does not build its clients (Options.Kafka, Options.Partner),
// and it holds no business rules but the comparison.
package reconcile
