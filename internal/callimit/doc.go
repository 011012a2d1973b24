// Package callimit bounds partner API calls in progress by a limit that
// adapts to what the partner sustains.
package callimit
