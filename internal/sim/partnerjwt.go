package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// partnerJWT is one kind of JWT a partner signs: the exchange-token partner
// token or the redemption sign. Its aud and typ tell it from the other
// kind.
type partnerJWT struct {
	name     string // in messages: "partner token" or "sign"
	aud, typ string // partnerprofile.None: not checked
	jti      partnerprofile.JTI
	iss      string
	algs     []string
	skew     time.Duration
	parser   *jwt.Parser
}

// partnerJWTKind is the kind name with the claims c of the Server's
// profile (partnerprofile.JWT): its algorithm (default RS256 or ES256, by
// the key), iss (default the client_id), aud and typ (none: not checked)
// and jti.
func (s *Server) partnerJWTKind(name string, c partnerprofile.Claims) partnerJWT {
	k := partnerJWT{name: name, aud: c.Audience, typ: c.Type, jti: c.JTI, iss: s.opts.Profile.JWT.IssuerFor(s.opts.ClientID),
		algs: []string{partnerprofile.AlgRS256, partnerprofile.AlgES256}, skew: s.opts.ClockSkew}
	if a := s.opts.Profile.JWT.Algorithm; a != "" {
		k.algs = []string{a}
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods(k.algs), jwt.WithExpirationRequired(), jwt.WithIssuedAt(),
		jwt.WithIssuer(k.iss), jwt.WithLeeway(s.opts.ClockSkew), jwt.WithTimeFunc(s.now)}
	if k.aud != partnerprofile.None {
		opts = append(opts, jwt.WithAudience(k.aud))
	}
	k.parser = jwt.NewParser(opts...)
	return k
}

// partnerClaims are the claims every partner JWT carries.
type partnerClaims struct {
	jwt.RegisteredClaims
	Typ string `json:"typ"`
}

// verifyPartnerJWT checks a partner-signed JWT of kind k: RS256/ES256 by a
// registered key, iss = client_id, aud and typ of k, iat present and not
// in the future, exp present, after iat and not passed (iat and exp with
// the clock skew allowed), jti present. claims is decoded from the token;
// pc is its partnerClaims part. It returns a message for the caller (""
// when valid) that never quotes the token. It does not use the jti up:
// see useJTI.
func (s *Server) verifyPartnerJWT(token string, k *partnerJWT, claims jwt.Claims, pc *partnerClaims) string {
	tok, err := k.parser.ParseWithClaims(token, claims, s.partnerKeyFunc)
	switch {
	case errors.Is(err, jwt.ErrTokenSignatureInvalid) && tok != nil && tok.Method != nil && !slices.Contains(k.algs, tok.Method.Alg()):
		return fmt.Sprintf("%s alg %s is not %s", k.name, tok.Method.Alg(), strings.Join(k.algs, " or "))
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return k.name + " not signed by a registered partner key"
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		return k.name + " " + k.claimProblem(pc, err)
	case err != nil:
		return k.name + " malformed"
	}
	switch {
	case pc.IssuedAt == nil:
		return k.name + " lacks iat"
	case !pc.ExpiresAt.After(pc.IssuedAt.Time):
		return k.name + " exp is not after iat"
	case k.typ != partnerprofile.None && pc.Typ != k.typ:
		return fmt.Sprintf("%s typ is not %s", k.name, k.typ)
	case k.jti != partnerprofile.JTINone && pc.ID == "":
		return k.name + " lacks jti"
	}
	return ""
}

// claimProblem names the first claim the parser refused (err), reading
// the decoded claims to tell a missing claim from a wrong one.
func (k *partnerJWT) claimProblem(pc *partnerClaims, err error) string {
	switch {
	case pc.ExpiresAt == nil:
		return "lacks exp"
	case errors.Is(err, jwt.ErrTokenExpired):
		return fmt.Sprintf("expired (more than the %s clock skew allowed ago)", k.skew)
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return fmt.Sprintf("iat is in the future (beyond the %s clock skew allowed)", k.skew)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return fmt.Sprintf("nbf is in the future (beyond the %s clock skew allowed)", k.skew)
	case pc.Issuer == "":
		return "lacks iss"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "iss is not " + k.iss
	case len(pc.Audience) == 0:
		return "lacks aud"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "aud is not " + k.aud
	}
	return "has invalid claims"
}

// useJTI accepts the jti of pc, a JWT of kind k that passed every other
// check, once: it returns a refusal message, or "". Call it last, so that
// a JWT refused for another reason does not use its jti up.
func (s *Server) useJTI(k *partnerJWT, pc *partnerClaims) string {
	if k.jti == partnerprofile.JTINone {
		return "" // the partner's profile asks no jti: there is nothing to replay-check by
	}
	out, changed := s.replay.use(replayKey{k.typ, pc.ID}, s.forgetJTIAt(pc.ExpiresAt.Time), s.now())
	if changed {
		if out == replayFull {
			s.log.Warn("jti replay cache full: partner JWTs refused until remembered ones expire",
				zap.Int("size", s.opts.ReplayCacheSize))
		} else {
			s.log.Info("jti replay cache has room again")
		}
	}
	switch out {
	case replaySeen:
		return k.name + " jti already used (each partner JWT is accepted once)"
	case replayFull:
		return k.name + " refused: too many unexpired partner JWTs remembered (jti replay cache full)"
	}
	return ""
}

// forgetJTIAt is when a JWT expiring at exp can no longer be accepted, so
// its jti need not be remembered: exp plus the clock skew allowed.
func (s *Server) forgetJTIAt(exp time.Time) time.Time { return exp.Add(s.opts.ClockSkew) }
