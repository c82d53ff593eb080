// A C2SP tlog-witness written apart from Wake Ledger's code, for
// tests/log/test_tlog_witness_interop.py: both sides of add-checkpoint, from
// the spec's text (c2sp.org/tlog-witness, tlog-cosignature, tlog-checkpoint),
// with Go's golang.org/x/mod/sumdb/note (the log's signature: note.Open) and
// sumdb/tlog (Merkle trees and consistency proofs: tlog.CheckTree,
// tlog.ProveTree). Only the cosignature/v1 signer and verifier are written
// here (x/mod has none), with Go's crypto/ed25519.
//
//	tlog_witness keygen NAME                  prints a note signer key and its verifier key
//	tlog_witness serve ADDR LOG_VKEY NAME     a witness; prints "PORT WITNESS_VKEY", then serves
//	tlog_witness client URL LOG_SKEY W_VKEY   submits a log of its own to a witness at URL;
//	                                          prints what each step got, one JSON object
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// ---------------------------------------------------------------- cosignature/v1

func cosigKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.Sum256(append([]byte(name+"\n\x04"), pub...))
	return binary.BigEndian.Uint32(h[:4])
}

func cosigVKey(name string, pub ed25519.PublicKey) string {
	return fmt.Sprintf("%s+%08x+%s", name, cosigKeyHash(name, pub),
		base64.StdEncoding.EncodeToString(append([]byte{0x04}, pub...)))
}

type cosigVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

func (v cosigVerifier) Name() string    { return v.name }
func (v cosigVerifier) KeyHash() uint32 { return v.hash }
func (v cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	if t == 0 || t > 1<<63-1 {
		return false
	}
	signed := append([]byte("cosignature/v1\ntime "+strconv.FormatUint(t, 10)+"\n"), msg...)
	return ed25519.Verify(v.key, signed, sig[8:])
}

func parseCosigVKey(vkey string) (cosigVerifier, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return cosigVerifier{}, errors.New("malformed witness key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 || raw[0] != 0x04 {
		return cosigVerifier{}, errors.New("not a cosignature/v1 key")
	}
	v := cosigVerifier{parts[0], cosigKeyHash(parts[0], raw[1:]), ed25519.PublicKey(raw[1:])}
	if fmt.Sprintf("%08x", v.hash) != parts[1] {
		return cosigVerifier{}, errors.New("witness key hash mismatch")
	}
	return v, nil
}

// ---------------------------------------------------------------- checkpoints

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

func parseCheckpoint(text string) (checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 || lines[0] == "" {
		return checkpoint{}, errors.New("not a checkpoint")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || (lines[1] != "0" && lines[1][0] == '0') {
		return checkpoint{}, errors.New("bad size")
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		return checkpoint{}, errors.New("bad root")
	}
	var root tlog.Hash
	copy(root[:], raw)
	return checkpoint{lines[0], size, root}, nil
}

func decimal(s string) (int64, bool) {
	if s == "" || (s != "0" && s[0] == '0') {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// ---------------------------------------------------------------- the witness

type witness struct {
	mu     sync.Mutex
	log    note.Verifier
	origin string
	name   string
	key    ed25519.PrivateKey
	size   int64 // the latest cosigned checkpoint (0: none)
	root   tlog.Hash
}

var emptyRoot = tlog.Hash(sha256.Sum256(nil))

func (w *witness) addCheckpoint(body []byte) (int, string, string) {
	head, rest, ok := bytes.Cut(body, []byte("\n\n"))
	if !ok {
		return 400, "text/plain", "no empty line\n"
	}
	lines := strings.Split(string(head), "\n")
	if !strings.HasPrefix(lines[0], "old ") {
		return 400, "text/plain", "no old line\n"
	}
	old, ok := decimal(lines[0][4:])
	if !ok || len(lines)-1 > 63 {
		return 400, "text/plain", "bad old line or proof\n"
	}
	var proof tlog.TreeProof
	for _, l := range lines[1:] {
		raw, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(raw) != tlog.HashSize {
			return 400, "text/plain", "bad proof line\n"
		}
		var h tlog.Hash
		copy(h[:], raw)
		proof = append(proof, h)
	}
	if i := bytes.LastIndex(rest, []byte("\n\n")); i < 0 ||
		!bytes.Equal(bytes.SplitN(rest, []byte("\n"), 2)[0], []byte(w.origin)) {
		if i < 0 {
			return 400, "text/plain", "not a note\n"
		}
		return 404, "text/plain", "unknown origin\n"
	}
	n, err := note.Open(rest, note.VerifierList(w.log))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return 403, "text/plain", err.Error() + "\n"
		}
		return 400, "text/plain", err.Error() + "\n"
	}
	c, err := parseCheckpoint(n.Text)
	if err != nil {
		return 400, "text/plain", err.Error() + "\n"
	}
	if old > c.size {
		return 400, "text/plain", "old size larger than the checkpoint\n"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old != w.size {
		return 409, "text/x.tlog.size", fmt.Sprintf("%d\n", w.size)
	}
	if c.size == 0 && c.root != emptyRoot {
		return 422, "text/plain", "size zero, not the empty root\n"
	}
	switch {
	case old == 0:
		if len(proof) != 0 {
			return 422, "text/plain", "a proof from zero\n"
		}
	case old == c.size:
		if c.root != w.root || len(proof) != 0 {
			return 422, "text/plain", "same size, another root\n"
		}
	default:
		if tlog.CheckTree(proof, c.size, c.root, old, w.root) != nil {
			return 422, "text/plain", "the consistency proof does not verify\n"
		}
	}
	w.size, w.root = c.size, c.root
	t := uint64(time.Now().Unix())
	msg := append([]byte("cosignature/v1\ntime "+strconv.FormatUint(t, 10)+"\n"), n.Text...)
	sig := make([]byte, 4, 4+8+ed25519.SignatureSize)
	binary.BigEndian.PutUint32(sig, cosigKeyHash(w.name, w.key.Public().(ed25519.PublicKey)))
	sig = binary.BigEndian.AppendUint64(sig, t)
	sig = append(sig, ed25519.Sign(w.key, msg)...)
	return 200, "text/plain", "— " + w.name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
}

func serve(addr, logVKey, name string) error {
	log, err := note.NewVerifier(logVKey)
	if err != nil {
		return err
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	w := &witness{log: log, origin: log.Name(), name: name, key: key}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("%d %s\n", listener.Addr().(*net.TCPAddr).Port, cosigVKey(name, pub))
	os.Stdout.Sync()
	http.HandleFunc("/add-checkpoint", func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			rw.WriteHeader(405)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		status, ctype, text := w.addCheckpoint(body)
		old, _, _ := strings.Cut(string(body), "\n")
		fmt.Fprintf(os.Stderr, "add-checkpoint %s -> %d\n", old, status)
		rw.Header().Set("Content-Type", ctype)
		rw.WriteHeader(status)
		io.WriteString(rw, text)
	})
	return http.Serve(listener, nil)
}

// ---------------------------------------------------------------- the client

type hashStorage map[int64]tlog.Hash

func (s hashStorage) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		h, ok := s[x]
		if !ok {
			return nil, fmt.Errorf("no hash %d", x)
		}
		out[i] = h
	}
	return out, nil
}

func client(url, skey, witnessVKey string) error {
	signer, err := note.NewSigner(skey)
	if err != nil {
		return err
	}
	wv, err := parseCosigVKey(witnessVKey)
	if err != nil {
		return err
	}
	stranger, _, _ := note.GenerateKey(rand.Reader, signer.Name())
	strangeSigner, _ := note.NewSigner(stranger)
	other, _, _ := note.GenerateKey(rand.Reader, "other.example/log")
	otherSigner, _ := note.NewSigner(other)

	// A log of 12 records, its stored hashes computed by x/mod's tlog.
	storage := hashStorage{}
	for i := int64(0); i < 12; i++ {
		hashes, err := tlog.StoredHashes(i, []byte(fmt.Sprintf("record %d", i)), storage)
		if err != nil {
			return err
		}
		for j, h := range hashes {
			storage[tlog.StoredHashIndex(0, i)+int64(j)] = h
		}
	}
	root := func(n int64) tlog.Hash {
		if n == 0 {
			return emptyRoot
		}
		h, err := tlog.TreeHash(n, storage)
		if err != nil {
			panic(err)
		}
		return h
	}
	signed := func(s note.Signer, origin string, n int64, r tlog.Hash) []byte {
		text := fmt.Sprintf("%s\n%d\n%s\n", origin, n, base64.StdEncoding.EncodeToString(r[:]))
		msg, err := note.Sign(&note.Note{Text: text}, s)
		if err != nil {
			panic(err)
		}
		return msg
	}
	prove := func(n, old int64) tlog.TreeProof {
		p, err := tlog.ProveTree(n, old, storage)
		if err != nil {
			panic(err)
		}
		return p
	}
	request := func(old int64, proof tlog.TreeProof, msg []byte) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "old %d\n", old)
		for _, h := range proof {
			b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
		}
		b.WriteString("\n")
		b.Write(msg)
		return b.Bytes()
	}
	origin := signer.Name()
	results := map[string]any{}
	post := func(step string, body []byte, msg []byte) {
		resp, err := http.Post(url+"/add-checkpoint", "text/plain", bytes.NewReader(body))
		if err != nil {
			results[step] = map[string]any{"error": err.Error()}
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := map[string]any{"status": resp.StatusCode,
			"type": resp.Header.Get("Content-Type"), "body": string(answer)}
		if resp.StatusCode == 200 && msg != nil {
			// The spec's way: the answer appended to the checkpoint, opened by
			// a note verifier that knows the log and the witness.
			log, _ := note.NewVerifier(mustVKey(skey))
			n, err := note.Open(append(append([]byte{}, msg...), answer...),
				note.VerifierList(log, wv))
			if err != nil {
				got["cosigned"] = err.Error()
			} else {
				names := []string{}
				for _, s := range n.Sigs {
					names = append(names, s.Name)
				}
				got["cosigned"] = strings.Join(names, ",")
			}
		}
		results[step] = got
	}
	post("empty_tree_wrong_root", request(0, nil, signed(signer, origin, 0, root(3))), nil)
	c4 := signed(signer, origin, 4, root(4))
	post("proof_not_empty_from_zero", request(0, prove(4, 2), c4), nil)
	post("first", request(0, nil, c4), c4)
	c7 := signed(signer, origin, 7, root(7))
	post("stale_old", request(0, nil, c7), nil)
	post("extends", request(4, prove(7, 4), c7), c7)
	c10 := signed(signer, origin, 10, root(10))
	bent := prove(10, 7)
	bent[0][0] ^= 1
	post("bad_proof", request(7, bent, c10), nil)
	post("untrusted_key", request(7, prove(10, 7), signed(strangeSigner, origin, 10, root(10))), nil)
	post("unknown_origin", request(0, nil, signed(otherSigner, "other.example/log", 3, root(3))), nil)
	post("empty_body", nil, nil)
	post("malformed", append([]byte("old 07\n\n"), c10...), nil)
	post("old_above_size", request(11, nil, c10), nil)
	post("extends_again", request(7, prove(10, 7), c10), c10)
	post("same_size", request(10, nil, c10), c10)
	post("same_size_other_root", request(10, nil, signed(signer, origin, 10, root(9))), nil)
	return json.NewEncoder(os.Stdout).Encode(results)
}

func mustVKey(skey string) string {
	// A note signer key is PRIVATE+NAME+HASH+KEY; its verifier key is the
	// public key: derived with crypto/ed25519 from the seed.
	parts := strings.SplitN(skey, "+", 5)
	raw, _ := base64.StdEncoding.DecodeString(parts[4])
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(parts[2], pub)
	if err != nil {
		panic(err)
	}
	return vkey
}

func main() {
	var err error
	switch {
	case len(os.Args) == 3 && os.Args[1] == "keygen":
		var skey, vkey string
		skey, vkey, err = note.GenerateKey(rand.Reader, os.Args[2])
		fmt.Println(skey)
		fmt.Println(vkey)
	case len(os.Args) == 5 && os.Args[1] == "serve":
		err = serve(os.Args[2], os.Args[3], os.Args[4])
	case len(os.Args) == 5 && os.Args[1] == "client":
		err = client(os.Args[2], os.Args[3], os.Args[4])
	default:
		err = errors.New("usage: tlog_witness keygen NAME | serve ADDR LOG_VKEY NAME | client URL LOG_SKEY WITNESS_VKEY")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
