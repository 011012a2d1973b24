package config

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
)

// WriteYAML writes the effective value of every flag of b's set, except
// those named in skip, as YAML a --config file accepts (run's
// --print-config). A secret that is set shows as ********, and so do the
// credentials of a URL (RedactURL): Validate refuses them, but
// --print-config also shows a configuration that does not validate.
func WriteYAML(w io.Writer, b *flagenv.Binder, skip ...string) {
	vars := b.Vars()
	b.FlagSet().VisitAll(func(f *flag.Flag) {
		if slices.Contains(skip, f.Name) {
			return
		}
		v := f.Value.String()
		switch {
		case vars[f.Name].Secret && v != "":
			v = "********"
		case strings.HasSuffix(f.Name, "url") || strings.Contains(v, "://"):
			v = RedactURL(v)
		}
		fmt.Fprintf(w, "%s: %s\n", f.Name, yamlScalar(v))
	})
}

func yamlScalar(v string) string {
	if v == "" || strings.ContainsAny(v, ":#{}[],&*!|>'\"%@` ") {
		return fmt.Sprintf("%q", v)
	}
	return v
}
