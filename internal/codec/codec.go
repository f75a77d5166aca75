// Package codec encrypts the Temporal payloads of Mantis's clients and workers with
// AES-256-GCM, so that commands, env and output reach Temporal's history as ciphertext.
//
// An encrypted payload carries the codec's encoding and the id of the key that sealed it
// in its metadata. Encode seals with the keyring's current key; Decode opens with whichever
// known key the payload names, so keys can be rotated: add a new key, make it current, and
// keep the old ones for as long as histories sealed with them must stay readable. Payloads
// without the codec's encoding (a `temporal workflow start` with plain JSON input) pass
// through both ways untouched.
//
// The keyring's keys never seal anything themselves: each purpose (Temporal payloads,
// secret env values) seals with its own key derived from the keyring key by HKDF, so
// that what is sealed for one purpose never opens as another. Data sealed before keys
// were derived, with the keyring key itself, still opens for every purpose.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

const (
	// Encoding is the metadata "encoding" of a payload this codec sealed.
	Encoding = "binary/encrypted"
	// MetadataKeyID is the payload metadata entry naming the key that sealed it.
	MetadataKeyID = "encryption-key-id"
	// KeySize is the length of every key: AES-256.
	KeySize = 32
)

// ErrUnknownKey is returned when a payload names a key id the keyring does not hold.
var ErrUnknownKey = errors.New("payload sealed with an unknown codec key")

// Codec is a converter.PayloadCodec sealing payloads with AES-256-GCM.
type Codec struct {
	current string
	// legacy holds the AEAD of each keyring key itself, which sealed everything
	// before keys were derived per purpose: it only opens.
	legacy map[string]cipher.AEAD
	raw    map[string][]byte

	mu      sync.Mutex
	derived map[purposeKey]cipher.AEAD
}

// purposeKey names a derived key: a keyring key id and a purpose.
type purposeKey struct{ keyID, purpose string }

// PurposePayload is the purpose of the keys that seal Temporal payloads.
const PurposePayload = "temporal-payload"

// derivedKeyInfo starts the HKDF info of every derived key; the purpose ends it.
const derivedKeyInfo = "mantis codec key v2: "

var _ converter.PayloadCodec = (*Codec)(nil)

// New returns the codec of keys: the payloads it encodes are sealed with the key named
// current, and it decodes payloads sealed with any of them.
func New(current string, keys map[string][]byte) (*Codec, error) {
	if _, ok := keys[current]; !ok {
		return nil, fmt.Errorf("current codec key %q is not among the keys", current)
	}
	c := &Codec{current: current, legacy: make(map[string]cipher.AEAD, len(keys)),
		raw: make(map[string][]byte, len(keys)), derived: map[purposeKey]cipher.AEAD{}}
	for id, key := range keys {
		if len(key) != KeySize {
			return nil, fmt.Errorf("codec key %q: must be %d bytes, got %d", id, KeySize, len(key))
		}
		aead, err := newAEAD(key)
		if err != nil {
			return nil, fmt.Errorf("codec key %q: %w", id, err)
		}
		c.legacy[id] = aead
		c.raw[id] = append([]byte(nil), key...)
	}
	return c, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// aead returns the AEAD of purpose under the keyring key keyID, deriving it the first
// time: HKDF-SHA256 of the keyring key, with the purpose in its info.
func (c *Codec) aead(keyID, purpose string) (cipher.AEAD, error) {
	raw, ok := c.raw[keyID]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKey, keyID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.derived[purposeKey{keyID, purpose}]; a != nil {
		return a, nil
	}
	key, err := hkdf.Key(sha256.New, raw, nil, derivedKeyInfo+purpose, KeySize)
	if err != nil {
		return nil, fmt.Errorf("deriving the %s key of codec key %q: %w", purpose, keyID, err)
	}
	a, err := newAEAD(key)
	if err != nil {
		return nil, fmt.Errorf("deriving the %s key of codec key %q: %w", purpose, keyID, err)
	}
	c.derived[purposeKey{keyID, purpose}] = a
	return a, nil
}

// CurrentKeyID is the id of the key Encode seals with.
func (c *Codec) CurrentKeyID() string { return c.current }

// Encode seals every payload with the current key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("encoding payload %d: %w", i, err)
		}
		sealed, err := c.SealFor(PurposePayload, plain)
		if err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(Encoding),
				MetadataKeyID:              []byte(c.current),
			},
			Data: sealed,
		}
	}
	return out, nil
}

// Decode opens every payload the codec sealed and passes the others through.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		plain, err := c.OpenFor(PurposePayload, string(p.GetMetadata()[MetadataKeyID]), p.GetData())
		if err != nil {
			return nil, fmt.Errorf("decoding payload %d: %w", i, err)
		}
		decoded := &commonpb.Payload{}
		if err := proto.Unmarshal(plain, decoded); err != nil {
			return nil, fmt.Errorf("decoding payload %d: %w", i, err)
		}
		out[i] = decoded
	}
	return out, nil
}

// SealFor encrypts plain for purpose with the current key's derived key: the nonce
// followed by the ciphertext, the key id bound in as additional data.
func (c *Codec) SealFor(purpose string, plain []byte) ([]byte, error) {
	aead, err := c.aead(c.current, purpose)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("drawing a nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plain, []byte(c.current)), nil
}

// OpenFor decrypts what SealFor returned for purpose under the key named keyID, or
// what the keyring key keyID itself sealed before keys were derived. What was sealed
// for another purpose does not open.
func (c *Codec) OpenFor(purpose, keyID string, sealed []byte) ([]byte, error) {
	aead, err := c.aead(keyID, purpose)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("sealed data is shorter than its nonce")
	}
	nonce, body := sealed[:aead.NonceSize()], sealed[aead.NonceSize():]
	plain, err := aead.Open(nil, nonce, body, []byte(keyID))
	if err == nil {
		return plain, nil
	}
	if plain, lerr := c.legacy[keyID].Open(nil, nonce, body, []byte(keyID)); lerr == nil {
		return plain, nil
	}
	return nil, fmt.Errorf("opening data sealed with codec key %q: %w", keyID, err)
}

// DataConverter wraps the SDK's default data converter with c.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// DeriveKey returns a 32-byte key for purpose derived from the current codec key, so
// that replicas sharing the keyring share it (the codec endpoint signs its sessions
// with one).
func (c *Codec) DeriveKey(purpose string) []byte {
	mac := hmac.New(sha256.New, c.raw[c.current])
	mac.Write([]byte("mantis derived key: " + purpose))
	return mac.Sum(nil)
}
