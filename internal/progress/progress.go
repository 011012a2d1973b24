package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// Bar draws a bar on a terminal and a plain line every two seconds
// otherwise (logs, CI): by its own clock through Show, or on the caller's
// schedule through Tick (with a note saying what the work waits for) and
// Update. It is not safe for concurrent use.
type Bar struct {
	w     io.Writer
	noun  string // "events answered"
	tty   bool
	start time.Time
	last  time.Time
	note  string // the last Tick's, kept on a terminal's bar
}

// New returns a Bar writing to w, counting noun ("records replayed")
// from start. It draws a bar only when w is a terminal.
func New(w io.Writer, noun string, start time.Time) *Bar {
	f, ok := w.(*os.File)
	return &Bar{w: w, noun: noun, tty: ok && term.IsTerminal(int(f.Fd())), start: start}
}

func (p *Bar) line(done, planned int) string {
	elapsed := time.Since(p.start).Seconds()
	rate := float64(done) / max(elapsed, 1e-3)
	eta := "?"
	if rate > 0 && planned > done {
		eta = (time.Duration(float64(planned-done)/rate) * time.Second).Round(time.Second).String()
	} else if planned <= done {
		eta = "0s"
	}
	pct := 100.0
	if planned > 0 {
		pct = 100 * float64(done) / float64(planned)
	}
	return fmt.Sprintf("%d/%d %s (%.0f%%)  %.0f/s  ETA %s", done, planned, p.noun, pct, rate, eta)
}

// Show reports done of planned; it draws at most every 100 ms on a
// terminal and every 2 s otherwise.
func (p *Bar) Show(done, planned int) {
	now := time.Now()
	if p.tty {
		p.Update(done, planned)
		return
	}
	if now.Sub(p.last) >= 2*time.Second {
		p.last = now
		fmt.Fprintln(p.w, p.line(done, planned))
	}
}

// Update redraws the bar on a terminal, at most every 100 ms, and draws
// nothing elsewhere: a caller that calls Tick on a schedule calls Update
// as work finishes in between, so that a log gets one line per tick.
func (p *Bar) Update(done, planned int) {
	if !p.tty {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < 100*time.Millisecond && done < planned {
		return
	}
	p.last = now
	p.draw(done, planned, p.note)
}

// Tick draws now, whatever changed since the last call: a line off a
// terminal, the bar on one. note says what the work waits for ("" when
// nothing holds it) and follows the counts; on a terminal it stays until
// the next Tick.
func (p *Bar) Tick(done, planned int, note string) {
	p.note = note
	if p.tty {
		p.last = time.Now()
		p.draw(done, planned, note)
		return
	}
	line := p.line(done, planned)
	if note != "" {
		line += "  " + note
	}
	fmt.Fprintln(p.w, line)
}

// draw redraws the terminal's bar in place.
func (p *Bar) draw(done, planned int, note string) {
	const width = 30
	filled := width
	if planned > 0 {
		filled = min(width*done/planned, width)
	}
	if note != "" {
		note = "  " + note
	}
	// \x1b[K clears what a longer line left.
	fmt.Fprintf(p.w, "\r[%s%s] %s%s\x1b[K", strings.Repeat("#", filled), strings.Repeat("-", width-filled), p.line(done, planned), note)
}

// Finish draws the final state and ends the line.
func (p *Bar) Finish(done, planned int) {
	if p.tty {
		p.draw(done, planned, "")
		fmt.Fprintln(p.w)
		return
	}
	fmt.Fprintln(p.w, p.line(done, planned))
}
