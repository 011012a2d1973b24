package pyreader

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Compare returns every difference between got, a record as the Python
// reader decoded it, and ref, the same record as franz-go read it, whose
// value the bridge's codec decoded into value (*events.LoyaltyResult,
// *events.LoyaltyError, or any struct whose fields carry avro tags). Each
// difference names its field: "key", "timestamp", "header[2] attempts",
// "value.source.offset". None means the Python reader saw exactly what we
// did, down to the Python type of each value.
func Compare(ref *kgo.Record, value any, got Record) []string {
	var d diffs
	if got.Topic != ref.Topic || got.Partition != ref.Partition || got.Offset != ref.Offset {
		d.add("record", "python read %s, the reference %s/%d@%d", got.Where(), ref.Topic, ref.Partition, ref.Offset)
	}
	if got.Error != "" {
		d.add("record", "python could not decode it: %s", got.Error)
		return d
	}
	switch {
	case ref.Key == nil && got.Key != nil:
		d.add("key", "want null, got %q", *got.Key)
	case ref.Key != nil && got.Key == nil:
		d.add("key", "want %q, got null", ref.Key)
	case ref.Key != nil && *got.Key != string(ref.Key):
		d.add("key", "want %q, got %q", ref.Key, *got.Key)
	}
	if want := ref.Timestamp.UnixMilli(); got.Timestamp != want {
		d.add("timestamp", "want %d, got %d", want, got.Timestamp)
	}
	compareHeaders(&d, ref.Headers, got.Headers)
	dec := json.NewDecoder(bytes.NewReader(got.Value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		d.add("value", "python's JSON: %v", err)
		return d
	}
	compareValue(&d, "value", reflect.ValueOf(value), v)
	return d
}

type diffs []string

func (d *diffs) add(field, format string, args ...any) {
	*d = append(*d, field+": "+fmt.Sprintf(format, args...))
}

func compareHeaders(d *diffs, want []kgo.RecordHeader, got []Header) {
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(got):
			d.add(fmt.Sprintf("header[%d] %s", i, want[i].Key), "missing in python's record")
			continue
		case i >= len(want):
			d.add(fmt.Sprintf("header[%d] %s", i, got[i].Key), "not in the reference record")
			continue
		}
		field := fmt.Sprintf("header[%d] %s", i, want[i].Key)
		if got[i].Key != want[i].Key {
			d.add(field, "python has key %q here", got[i].Key)
		}
		gv, err := got[i].Bytes()
		switch {
		case err != nil:
			d.add(field, "%v", err)
		case (gv == nil) != (want[i].Value == nil):
			d.add(field, "want %s, got %s", headerText(want[i].Value), headerText(gv))
		case !bytes.Equal(gv, want[i].Value):
			d.add(field, "want %s, got %s", headerText(want[i].Value), headerText(gv))
		}
	}
}

func headerText(b []byte) string {
	if b == nil {
		return "null"
	}
	return fmt.Sprintf("%q", b)
}

var timeType = reflect.TypeFor[time.Time]()

// compareValue holds got, a value decoded from python's JSON (UseNumber),
// to want, walking want's avro-tagged fields.
func compareValue(d *diffs, path string, want reflect.Value, got any) {
	if want.Kind() == reflect.Interface {
		want = want.Elem()
	}
	if !want.IsValid() {
		if got != nil {
			d.add(path, "want null, got %s", describe(got))
		}
		return
	}
	switch {
	case want.Kind() == reflect.Pointer:
		if want.IsNil() {
			if got != nil {
				d.add(path, "want null, got %s", describe(got))
			}
			return
		}
		compareValue(d, path, want.Elem(), got)
	case want.Type() == timeType:
		compareTime(d, path, want.Interface().(time.Time), got)
	case want.Kind() == reflect.Slice && want.Type().Elem().Kind() == reflect.Uint8:
		compareBytes(d, path, want.Bytes(), want.IsNil(), got)
	case want.Kind() == reflect.Struct:
		compareRecord(d, path, want, got)
	case want.Kind() == reflect.String:
		if s, ok := got.(string); !ok || s != want.String() {
			d.add(path, "want string %q, got %s", want.String(), describe(got))
		}
	case want.Kind() == reflect.Bool:
		if b, ok := got.(bool); !ok || b != want.Bool() {
			d.add(path, "want %t, got %s", want.Bool(), describe(got))
		}
	case want.CanInt():
		n, ok := got.(json.Number)
		if i, err := n.Int64(); !ok || !isInteger(n) || err != nil || i != want.Int() {
			d.add(path, "want integer %d, got %s", want.Int(), describe(got))
		}
	case want.CanFloat():
		n, ok := got.(json.Number)
		if f, err := n.Float64(); !ok || isInteger(n) || err != nil || f != want.Float() {
			d.add(path, "want float %v, got %s", want.Float(), describe(got))
		}
	default:
		d.add(path, "the reference holds a %s, which Compare does not know", want.Type())
	}
}

func compareRecord(d *diffs, path string, want reflect.Value, got any) {
	obj, ok := got.(map[string]any)
	if !ok || isTagged(obj) {
		d.add(path, "want a record (dict), got %s", describe(got))
		return
	}
	seen := map[string]bool{}
	for i := range want.NumField() {
		name, _, _ := strings.Cut(want.Type().Field(i).Tag.Get("avro"), ",")
		if name == "" || name == "-" {
			continue
		}
		seen[name] = true
		gv, present := obj[name]
		if !present {
			d.add(path+"."+name, "missing in python's record")
			continue
		}
		compareValue(d, path+"."+name, want.Field(i), gv)
	}
	for name := range obj {
		if !seen[name] {
			d.add(path+"."+name, "not in the reference record (python has %s)", describe(obj[name]))
		}
	}
}

// compareTime wants a timezone-aware datetime at want's instant: fastavro
// gives timestamp-millis as a datetime in UTC, and a naive one would be
// read as local time by every Python consumer downstream.
func compareTime(d *diffs, path string, want time.Time, got any) {
	s, ok := tagOf(got, "$datetime")
	if !ok {
		d.add(path, "want a datetime (timestamp-millis), got %s", describe(got))
		return
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	switch {
	case err != nil:
		d.add(path, "datetime %q is not timezone-aware RFC 3339: %v", s, err)
	case !at.Equal(want):
		d.add(path, "want %s, got %s", want.UTC().Format(time.RFC3339Nano), s)
	}
}

func compareBytes(d *diffs, path string, want []byte, null bool, got any) {
	if null {
		if got != nil {
			d.add(path, "want null, got %s", describe(got))
		}
		return
	}
	s, ok := tagOf(got, "$bytes")
	if !ok {
		d.add(path, "want bytes, got %s", describe(got))
		return
	}
	b, err := base64.StdEncoding.DecodeString(s)
	switch {
	case err != nil:
		d.add(path, "bytes: %v", err)
	case !bytes.Equal(b, want):
		d.add(path, "want %d bytes %.40q, got %d bytes %.40q", len(want), want, len(b), b)
	}
}

// tagOf returns the text of a value the script tagged as {tag: text}.
func tagOf(got any, tag string) (string, bool) {
	obj, ok := got.(map[string]any)
	if !ok || len(obj) != 1 {
		return "", false
	}
	s, ok := obj[tag].(string)
	return s, ok
}

// isTagged reports whether obj is the script's tag of a non-JSON type
// rather than an Avro record.
func isTagged(obj map[string]any) bool {
	for k := range obj {
		if strings.HasPrefix(k, "$") {
			return true
		}
	}
	return false
}

// isInteger reports whether a JSON number was printed from a Python int:
// json.dumps prints a float with a point or an exponent, always.
func isInteger(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

// describe says what python's value is, type first, briefly.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null (None)"
	case bool:
		return fmt.Sprintf("bool %t", v)
	case string:
		return fmt.Sprintf("string %.60q", v)
	case json.Number:
		if isInteger(v) {
			return "integer " + string(v)
		}
		return "float " + string(v)
	case []any:
		return fmt.Sprintf("array of %d", len(v))
	case map[string]any:
		if isTagged(v) {
			b, _ := json.Marshal(v)
			return fmt.Sprintf("%.80s", b)
		}
		return fmt.Sprintf("record (dict) of %d fields", len(v))
	}
	return fmt.Sprintf("%T", v)
}
