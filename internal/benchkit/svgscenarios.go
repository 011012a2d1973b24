package benchkit

import (
	"fmt"
	"math"
	"strings"
)

// The chart of a multi-scenario run: eight panels (whole-run and steady
// throughput, each with its ratio to the clean run, API calls per record,
// pushed-back share, p99 latency, peak RSS), each with the scenarios
// along the x axis and one bar per contestant in each.

// The panels are stacked, each the chart's full width, so that a
// scenario's label (one knob a line) fits under its bars.
const (
	scPanelW = svgW - 40 // a panel's width, axis labels included
	scPanelH = 150       // plot height of a panel
	scLabelH = 50        // room under it for scenario labels
)

// scenarioMetric is a panel; unity draws a line at 1 (the clean run's
// level, for a ratio).
type scenarioMetric struct {
	metric
	unity bool
}

var scenarioMetrics = []scenarioMetric{
	{metric{"throughput, whole run (records/s, first reply to last)", func(r Result) float64 { return r.RecordsPerSec }, false}, false},
	{metric{"whole-run throughput ÷ the clean run's", func(r Result) float64 { return r.VsClean }, false}, true},
	{metric{"steady throughput (records/s, 10th to 90th percentile reply)", func(r Result) float64 { return r.SteadyPerSec }, false}, false},
	{metric{"steady throughput ÷ the clean run's steady throughput", func(r Result) float64 { return r.SteadyVsClean }, false}, true},
	{metric{"API calls per record", func(r Result) float64 { return r.APICallsPerRecord }, false}, false},
	{metric{"calls answered 429/503 (%)", func(r Result) float64 { return 100 * r.PushedBackShare }, false}, false},
	{metric{"p99 end-to-end latency (ms)", func(r Result) float64 { return r.LatencyP99Ms }, true}, false},
	{metric{"peak RSS (MiB)", func(r Result) float64 { return r.PeakRSSMiB }, false}, false},
}

func (r *Report) writeScenarioSVG(b *strings.Builder) {
	h := 104 + len(scenarioMetrics)*(scPanelH+scLabelH+40)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgW, h, svgW, h)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	text(b, 20, 24, 15, "start", "bold", "loyalty-bench: a degraded partner, scenarios side by side")
	text(b, 20, 42, 11, "start", "", r.subtitle())
	names := r.contestants()
	color := map[string]string{}
	x := 20.0
	for i, n := range names {
		color[n] = palette[(i+2)%len(palette)]
		fmt.Fprintf(b, `<rect x="%.0f" y="54" width="12" height="12" fill="%s"/>`+"\n", x, color[n])
		text(b, x+16, 64, 11, "start", "", n)
		x += 30 + 7*float64(len(n))
	}
	for i, m := range scenarioMetrics {
		ox := 20.0
		oy := 104 + float64(i)*(scPanelH+scLabelH+40)
		r.scenarioPanel(b, ox, oy, m.metric, names, color, m.unity)
	}
	b.WriteString("</svg>\n")
}

// scenarioPanel draws one metric at (ox, oy); unity draws a line at 1
// (the clean run's level, for the ratio).
func (r *Report) scenarioPanel(b *strings.Builder, ox, oy float64, m metric, names []string, color map[string]string, unity bool) {
	vals := make([][]float64, len(r.Points)) // [point][contestant], NaN: none
	lo, hi := math.Inf(1), 0.0
	for pi, pt := range r.Points {
		vals[pi] = make([]float64, len(names))
		for ni, n := range names {
			vals[pi][ni] = math.NaN()
			for _, res := range pt.Results {
				if res.Contestant == n && res.Error == "" && res.Done > 0 {
					v := m.value(res)
					vals[pi][ni] = v
					if v > 0 {
						lo, hi = math.Min(lo, v), math.Max(hi, v)
					}
				}
			}
		}
	}
	plotW, plotH := float64(scPanelW-padL), float64(scPanelH)
	px, py := ox+padL, oy
	text(b, ox, oy-10, 12, "start", "bold", m.title)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#d1d5db"/>`+"\n", px, py, plotW, plotH)
	slot := plotW / float64(max(1, len(r.Points)))
	for pi, pt := range r.Points {
		cx := px + slot*(float64(pi)+0.5)
		for li, line := range strings.Split(pt.Name, ",") {
			text(b, cx, py+plotH+14+12*float64(li), 10, "middle", "", line)
		}
	}
	if unity {
		hi = math.Max(hi, 1)
	}
	if hi == 0 {
		text(b, px+plotW/2, py+plotH/2, 11, "middle", "", "none")
		return
	}
	scale, useLog := yAxis(b, px, py, plotW, plotH, lo, hi, m.log, 3, ox+scPanelW)
	if unity {
		y := scale(1)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#111827" stroke-dasharray="4 3"/>`+"\n", px, y, px+plotW, y)
	}
	barW := math.Min(slot*0.7/float64(max(1, len(names))), 40)
	for pi := range r.Points {
		cx := px + slot*(float64(pi)+0.5)
		for ni, n := range names {
			v := vals[pi][ni]
			x := cx + (float64(ni)-float64(len(names))/2)*barW
			if math.IsNaN(v) || (useLog && v <= 0) {
				continue
			}
			y := scale(v)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %s</title></rect>`+"\n",
				x, y, barW, py+plotH-y, color[n], esc(r.Points[pi].Name), esc(n), compact(v))
			text(b, x+barW/2, y-4, 9, "middle", "", compact(v))
		}
	}
}
