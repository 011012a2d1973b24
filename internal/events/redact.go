package events

import (
	"fmt"
	"log/slog"
	"reflect"

	"go.uber.org/zap/zapcore"
)

// Redacted is the one marker printed in place of a withheld value: personal
// data in MemberOnboardRequested's print forms, in Redact's copies and in
// the bridge's error events, and every value the logger redacts
// (internal/telemetry), secrets included.
const Redacted = "[redacted]"

// String is the redacted form: identifiers and non-personal fields only.
func (e MemberOnboardRequested) String() string {
	return fmt.Sprintf("MemberOnboardRequested{transactionId:%q externalId:%q gender:%q nationality:%q isKYC:%t personalData:%s}",
		e.TransactionID, e.ExternalID, e.Gender, e.Nationality, e.IsKYC, Redacted)
}

// Format makes every fmt verb (%v, %+v, %#v, %s, %q) print the redacted
// form, so that a stray Printf or error wrap cannot leak personal data.
func (e MemberOnboardRequested) Format(f fmt.State, _ rune) {
	_, _ = f.Write([]byte(e.String()))
}

// MarshalLogObject logs the redacted form with zap.Object.
func (e MemberOnboardRequested) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("type", string(TypeMemberOnboardRequested))
	enc.AddString("transactionId", e.TransactionID)
	enc.AddString("externalId", e.ExternalID)
	enc.AddString("gender", e.Gender)
	enc.AddString("nationality", e.Nationality)
	enc.AddBool("isKYC", e.IsKYC)
	enc.AddString("personalData", Redacted)
	return nil
}

// LogValue logs the redacted form with log/slog.
func (e MemberOnboardRequested) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("type", string(TypeMemberOnboardRequested)),
		slog.String("transactionId", e.TransactionID),
		slog.String("externalId", e.ExternalID),
		slog.String("personalData", Redacted),
	)
}

// Redact returns a copy of e with every personal datum (PersonalFields)
// replaced by Redacted; absent optional fields stay absent, and e's own
// pointers are not written through. Tools that display onboarding events
// (tail) show this form unless told otherwise.
func (e MemberOnboardRequested) Redact() MemberOnboardRequested {
	eachPersonal(&e, func(_ string, f reflect.Value) {
		if f.Kind() == reflect.Pointer {
			s := Redacted
			f.Set(reflect.ValueOf(&s))
			return
		}
		f.SetString(Redacted)
	})
	return e
}
