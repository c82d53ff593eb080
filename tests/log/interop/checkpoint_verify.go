// An independent check of Wake Ledger's checkpoints, run by
// tests/test_checkpoint_interop.py: Go's golang.org/x/mod/sumdb/note parses the
// signed note and verifies the log's Ed25519 note signature; the witnesses'
// cosignature/v1 lines are verified by a note.Verifier written here from the
// C2SP tlog-cosignature text with Go's crypto/ed25519 (x/mod has no
// cosignature verifier). Usage: checkpoint_verify NOTE_FILE LOG_VKEY [WITNESS_VKEY...]
// Prints one JSON object; exits 1 if the note does not verify.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

type cosigVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

func (v cosigVerifier) Name() string    { return v.name }
func (v cosigVerifier) KeyHash() uint32 { return v.hash }

// Verify: sig is the 8-byte big-endian timestamp then the Ed25519 signature
// over "cosignature/v1\ntime <t>\n" and the checkpoint body.
func (v cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	signed := append([]byte("cosignature/v1\ntime "+strconv.FormatUint(t, 10)+"\n"), msg...)
	return ed25519.Verify(v.key, signed, sig[8:])
}

func newCosigVerifier(vkey string) (cosigVerifier, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return cosigVerifier{}, fmt.Errorf("malformed witness key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 || raw[0] != 0x04 {
		return cosigVerifier{}, fmt.Errorf("not a cosignature/v1 key")
	}
	h := sha256.Sum256(append([]byte(parts[0]+"\n"), raw...))
	hash := binary.BigEndian.Uint32(h[:4])
	if fmt.Sprintf("%08x", hash) != parts[1] {
		return cosigVerifier{}, fmt.Errorf("witness key hash mismatch")
	}
	return cosigVerifier{parts[0], hash, ed25519.PublicKey(raw[1:])}, nil
}

func main() {
	out := map[string]interface{}{"ok": false}
	defer func() {
		json.NewEncoder(os.Stdout).Encode(out)
		if out["ok"] != true {
			os.Exit(1)
		}
	}()
	msg, err := os.ReadFile(os.Args[1])
	if err != nil {
		out["error"] = err.Error()
		return
	}
	logV, err := note.NewVerifier(os.Args[2])
	if err != nil {
		out["error"] = "log key: " + err.Error()
		return
	}
	verifiers := []note.Verifier{logV}
	for _, vkey := range os.Args[3:] {
		v, err := newCosigVerifier(vkey)
		if err != nil {
			out["error"] = err.Error()
			return
		}
		verifiers = append(verifiers, v)
	}
	n, err := note.Open(msg, note.VerifierList(verifiers...))
	if err != nil {
		out["error"] = err.Error()
		return
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	root, _ := base64.StdEncoding.DecodeString(lines[2])
	names := []string{}
	for _, s := range n.Sigs {
		names = append(names, s.Name)
	}
	out["verified"] = names
	out["unverified"] = len(n.UnverifiedSigs)
	out["origin"] = lines[0]
	out["size"] = lines[1]
	out["root"] = fmt.Sprintf("%x", root)
	out["ok"] = bytes.HasPrefix(msg, []byte(n.Text)) && len(n.Sigs) == len(verifiers)
}
