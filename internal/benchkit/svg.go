package benchkit

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

// The chart: four panels (throughput, p99 latency, CPU per 1,000 records,
// peak RSS). With a sweep, one line per contestant over the swept values;
// without, one bar per contestant. Throughput spans orders of magnitude
// (baseline against bridge), so its axis is logarithmic when it has to be.

const (
	svgW, svgH     = 960, 714
	panelW, panelH = 440, 250
	padL, padB     = 64, 40
)

var palette = []string{"#6b7280", "#dc2626", "#2563eb", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2"}

type metric struct {
	title string
	value func(Result) float64
	log   bool // allow a log axis
}

var metrics = []metric{
	{"throughput (records/s)", func(r Result) float64 { return r.RecordsPerSec }, true},
	{"p99 end-to-end latency (ms)", func(r Result) float64 { return r.LatencyP99Ms }, true},
	{"CPU seconds per 1,000 records", func(r Result) float64 { return r.CPUPer1k }, false},
	{"peak RSS (MiB)", func(r Result) float64 { return r.PeakRSSMiB }, false},
}

// WriteSVG draws the report as a standalone SVG document.
func (r *Report) WriteSVG(w io.Writer) error {
	var b strings.Builder
	if r.scenarios() {
		r.writeScenarioSVG(&b)
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgW, svgH, svgW, svgH)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	text(&b, 20, 24, 15, "start", "bold", r.title())
	text(&b, 20, 42, 11, "start", "", r.subtitle())
	names := r.contestants()
	color := map[string]string{}
	x := 20.0
	for i, n := range names {
		color[n] = palette[i%len(palette)]
		fmt.Fprintf(&b, `<rect x="%.0f" y="54" width="12" height="12" fill="%s"/>`+"\n", x, color[n])
		text(&b, x+16, 64, 11, "start", "", n)
		x += 30 + 7*float64(len(n))
	}
	for i, m := range metrics {
		ox := 20 + float64(i%2)*(panelW+40)
		oy := 104 + float64(i/2)*(panelH+60)
		r.panel(&b, ox, oy, m, names, color)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) title() string {
	if r.Sweep != nil && len(r.Points) > 1 {
		return "loyalty-bench: contestants over " + r.Sweep.Param
	}
	return "loyalty-bench: contestants side by side"
}

func (r *Report) subtitle() string {
	if len(r.Points) == 0 {
		return ""
	}
	sc := r.Points[0].Scenario
	parts := []string{}
	if r.Sweep == nil || r.Sweep.Param != SweepBacklog {
		parts = append(parts, fmt.Sprintf("%d events", sc.Events))
	}
	parts = append(parts, fmt.Sprintf("%d partitions", sc.Partitions), fmt.Sprintf("%d keys", sc.Keys), "API latency "+sc.Latency)
	if sc.LatencyP50 != "" {
		parts = append(parts, "tail p50 "+sc.LatencyP50+"/p99 "+sc.LatencyP99)
	}
	if r.Sweep == nil || r.Sweep.Param != SweepInFlight {
		parts = append(parts, fmt.Sprintf("max in-flight %d", sc.MaxInFlight))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" — %s, %d CPUs; absolute figures vary by machine", r.Platform, r.CPUs)
}

// panel draws one metric at (ox, oy).
func (r *Report) panel(b *strings.Builder, ox, oy float64, m metric, names []string, color map[string]string) {
	sweep := r.Sweep != nil && len(r.Points) > 1
	// Collect the values: series[name][point index], NaN where missing.
	series := map[string][]float64{}
	lo, hi := math.Inf(1), 0.0
	for _, n := range names {
		vals := make([]float64, len(r.Points))
		for pi, pt := range r.Points {
			vals[pi] = math.NaN()
			for _, res := range pt.Results {
				if res.Contestant == n && res.Error == "" && res.Done > 0 {
					v := m.value(res)
					vals[pi] = v
					if v > 0 {
						lo, hi = math.Min(lo, v), math.Max(hi, v)
					}
				}
			}
		}
		series[n] = vals
	}
	plotW, plotH := float64(panelW-padL), float64(panelH-padB)
	px, py := ox+padL, oy
	text(b, ox, oy-10, 12, "start", "bold", m.title)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#d1d5db"/>`+"\n", px, py, plotW, plotH)
	if hi == 0 {
		text(b, px+plotW/2, py+plotH/2, 11, "middle", "", "no data")
		return
	}
	scale, useLog := yAxis(b, px, py, plotW, plotH, lo, hi, m.log, 4, ox+panelW)
	if sweep {
		slot := plotW / float64(len(r.Points))
		xAt := func(pi int) float64 { return px + slot*(float64(pi)+0.5) }
		for pi, pt := range r.Points {
			text(b, xAt(pi), py+plotH+16, 10, "middle", "", compact(float64(pt.SweepValue)))
		}
		text(b, px+plotW/2, py+plotH+32, 10, "middle", "", r.Sweep.Param)
		for _, n := range names {
			var pts []string
			for pi, v := range series[n] {
				if math.IsNaN(v) || (useLog && v <= 0) {
					continue
				}
				x, y := xAt(pi), scale(v)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s %s=%d: %s</title></circle>`+"\n",
					x, y, color[n], esc(n), esc(r.Sweep.Param), r.Points[pi].SweepValue, compact(v))
			}
			if len(pts) > 1 {
				fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color[n])
			}
		}
		return
	}
	slot := plotW / float64(len(names))
	barW := math.Min(slot*0.6, 60)
	for i, n := range names {
		v := series[n][0]
		x := px + slot*(float64(i)+0.5)
		// Two lines ("bridge" over "partition") so neighbours do not collide.
		first, second, two := strings.Cut(n, "/")
		if two {
			text(b, x, py+plotH+14, 10, "middle", "", first)
			text(b, x, py+plotH+26, 10, "middle", "", second)
		} else {
			text(b, x, py+plotH+14, 10, "middle", "", n)
		}
		if math.IsNaN(v) || (useLog && v <= 0) {
			text(b, x, py+plotH-6, 10, "middle", "", "n/a")
			continue
		}
		y := scale(v)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`+"\n",
			x-barW/2, y, barW, py+plotH-y, color[n], esc(n), compact(v))
		text(b, x, y-4, 10, "middle", "", compact(v))
	}
}

func gridLine(b *strings.Builder, x, y, w float64) {
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e7eb"/>`+"\n", x, y, x+w, y)
}

func text(b *strings.Builder, x, y float64, size int, anchor, weight, s string) {
	fw := ""
	if weight != "" {
		fw = ` font-weight="` + weight + `"`
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s"%s>%s</text>`+"\n", x, y, size, anchor, fw, esc(s))
}

func esc(s string) string { return html.EscapeString(s) }

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// compact formats a figure for an axis or a label: 1200 → "1.2k".
func compact(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trimZero(strconv.FormatFloat(v/1e6, 'f', 1, 64)) + "M"
	case a >= 1e4:
		return trimZero(strconv.FormatFloat(v/1e3, 'f', 0, 64)) + "k"
	case a >= 1e3:
		return trimZero(strconv.FormatFloat(v/1e3, 'f', 1, 64)) + "k"
	case a >= 10 || a == 0:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1:
		return trimZero(strconv.FormatFloat(v, 'f', 1, 64))
	}
	return trimZero(strconv.FormatFloat(v, 'f', 3, 64))
}

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// yAxis draws a panel's grid and value labels for values up to hi (lo the
// smallest above 0) and returns the value → y mapping. A log scale is used
// when asked and the values span more than a factor of 20; it is named at
// logX. The linear scale has about ticks grid lines.
func yAxis(b *strings.Builder, px, py, plotW, plotH, lo, hi float64, log bool, ticks int, logX float64) (scale func(float64) float64, useLog bool) {
	if log && lo > 0 && hi/lo > 20 {
		// Headroom above the highest bar for its label.
		a, z := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi*1.4))
		if z == a {
			z++
		}
		scale = func(v float64) float64 { return py + plotH - (math.Log10(v)-a)/(z-a)*plotH }
		for e := a; e <= z; e++ {
			y := scale(math.Pow(10, e))
			gridLine(b, px, y, plotW)
			text(b, px-6, y+4, 10, "end", "", compact(math.Pow(10, e)))
		}
		text(b, logX, py-10, 10, "end", "", "log scale")
		return scale, true
	}
	step := niceStep(hi / float64(ticks))
	top := math.Ceil(hi*1.12/step) * step
	scale = func(v float64) float64 { return py + plotH - v/top*plotH }
	for v := 0.0; v <= top+step/2; v += step {
		y := scale(v)
		gridLine(b, px, y, plotW)
		text(b, px-6, y+4, 10, "end", "", compact(v))
	}
	return scale, false
}
