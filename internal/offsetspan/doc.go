// Package offsetspan reads the committed records of offset spans: the
// offsets [From, To) of partitions, planned beforehand (replay's ranges,
// reconcile's windows).
//
// Read uses a client of its own that consumes the spans' partitions
// directly: it joins no group, commits nothing and never resets an offset,
// so a live consumer group neither rebalances nor loses its place, and a
// record deleted under the reader (retention) fails the read rather than
// being skipped. Only committed records are read, and transaction markers
// are kept to see a span's end when its last offsets are markers or an
// aborted batch; they are not handed on. A span is read once, to its end.
//
// The package does not plan spans (the callers know which offsets they
// need), decode records or build the connection: the caller gives its
// connection options.
package offsetspan
