// Package webhook delivers deployment and step events to the webhooks users
// register: the signature a receiver checks, the checks on a webhook, and the
// Worker that fans the event log out to deliveries and sends them with retries.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sign returns the value of the Mantis-Signature header (api.WebhookSignatureHeader)
// of body sent at t: "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed by
// secret>".
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// Verify checks a Mantis-Signature header against body and secret, and that its
// time is within tolerance of now (replays of old deliveries are refused).
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("signature header must be t=<unix>,v1=<hex>")
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("signature time %s is more than %s from now", time.Unix(unix, 0).UTC(), tolerance)
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(secret, ts, body)) {
		return errors.New("signature does not match the body")
	}
	return nil
}

// mac is HMAC-SHA256 of "<ts>.<body>" keyed by secret.
func mac(secret, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}
