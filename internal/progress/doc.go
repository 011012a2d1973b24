// Package progress draws the operator commands' progress: a bar with rate
// and ETA on a terminal, a plain line every two seconds elsewhere, so that
// logs and CI output stay readable.
package progress
