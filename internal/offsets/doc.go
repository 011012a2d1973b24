// Package offsets is the operator's view of a consumer group's position:
// what it has committed, where each partition ends and the lag between
// them (Lag, Report, Show; a group the cluster does not know is a
// NoGroupError naming those it does), and moving one topic's commits to a time, an
// offset, the log start or the end (Reset), with the check that nobody is
// in the group while that happens (Idle).
//
// Everything goes through a kadm.Client the caller builds (its connection
// and security settings are the caller's business). The package never
// joins the group, consumes or produces records, and knows nothing of the
// bridge's events, codec or partner API. It returns data and typed errors;
// only Show, Report.Print and PrintMoves write, to the writer they are
// given. Errors name the group and topic, never record contents.
package offsets
