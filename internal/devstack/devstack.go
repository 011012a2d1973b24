package devstack

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// Options configures Start. Zero values give the documented defaults.
type Options struct {
	// DataDir persists Kafka data, registered schemas and the partner key.
	// Empty means everything lives in memory and dies with the process.
	DataDir string
	// KafkaAddr is the broker's listen address. Default 127.0.0.1:9092;
	// port 0 picks a free port (tests). Unused with Brokers.
	KafkaAddr string
	// Brokers, when not empty, is the bootstrap list of an external Kafka
	// cluster to use instead of starting kfake: Topics are created there
	// (an existing one is kept as it is), replicated min(3, brokers) times,
	// and Start returns once every broker lists them and their leaders
	// serve them. DataDir then keeps no Kafka data, and Close deletes
	// nothing: the topics are the cluster's.
	Brokers []string
	// RegistryAddr is the Schema Registry's listen address. Default
	// 127.0.0.1:8081.
	RegistryAddr string
	// SimAddr is the simulator's listen address. Default 127.0.0.1:8088.
	SimAddr string
	// Partitions of every topic the stack creates. Default 8.
	Partitions int32
	// Topics to create (and their reply topics are the caller's to list).
	Topics []string
	// Sim configures the simulator; the stack adds its partner public key.
	Sim sim.Options
	// Logger; nil means no logs.
	Logger *zap.Logger
}

// Stack is a running development stack. Close stops it.
type Stack struct {
	Brokers        []string
	RegistryURL    string
	SimURL         string
	Sim            *sim.Server
	Registry       *srfake.Registry
	Cluster        *kfake.Cluster // nil with Options.Brokers
	PartnerKey     *ecdsa.PrivateKey
	PartnerKeyID   string
	PartnerKeyPath string // PEM of the partner private key ("" without DataDir)

	log        *zap.Logger
	schemaPath string
	servers    []*http.Server
	wg         sync.WaitGroup
	saveMu     sync.Mutex
	closeOnce  sync.Once
}

func withDefaults(o Options) Options {
	if o.KafkaAddr == "" {
		o.KafkaAddr = "127.0.0.1:9092"
	}
	if o.RegistryAddr == "" {
		o.RegistryAddr = "127.0.0.1:8081"
	}
	if o.SimAddr == "" {
		o.SimAddr = "127.0.0.1:8088"
	}
	if o.Partitions <= 0 {
		o.Partitions = 8
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// Start brings the stack up. On error everything already started is stopped.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	opts = withDefaults(opts)
	s := &Stack{log: opts.Logger}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		s.schemaPath = filepath.Join(opts.DataDir, "schemas.json")
		s.PartnerKeyPath = filepath.Join(opts.DataDir, "partner-key.pem")
	}

	if err := s.loadPartnerKey(); err != nil {
		return nil, err
	}

	// Kafka.
	if len(opts.Brokers) > 0 {
		if err := s.useExternal(ctx, opts); err != nil {
			return nil, err
		}
	} else if err := s.startKfake(opts); err != nil {
		return nil, err
	}

	// Schema Registry.
	s.Registry = srfake.NewRegistry()
	shared, err := s.loadSchemas()
	if err != nil {
		return nil, err
	}
	regURL, err := s.serve(opts.RegistryAddr, s.saveAfterWrites(s.Registry.Handler()))
	if err != nil {
		return nil, fmt.Errorf("schema registry on %s: %w", opts.RegistryAddr, err)
	}
	s.RegistryURL = regURL
	if err := s.registerShared(ctx, shared); err != nil {
		return nil, err
	}

	// Simulator.
	simOpts := opts.Sim
	simOpts.PartnerKeys = append(append([]sim.PartnerKey(nil), simOpts.PartnerKeys...),
		sim.PartnerKey{KID: s.PartnerKeyID, Key: &s.PartnerKey.PublicKey})
	if simOpts.Logger == nil {
		simOpts.Logger = opts.Logger.Named("sim")
	}
	s.Sim, err = sim.New(simOpts)
	if err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	s.SimURL, err = s.serve(opts.SimAddr, s.Sim)
	if err != nil {
		return nil, fmt.Errorf("simulator on %s: %w", opts.SimAddr, err)
	}
	return s, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q: not a port number", p)
	}
	return host, port, nil
}

func (s *Stack) serve(addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	unused := &unusedConns{conns: map[net.Conn]bool{}}
	srv.ConnState = unused.track
	srv.RegisterOnShutdown(unused.close)
	s.servers = append(s.servers, srv)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("dev server stopped", zap.String("addr", addr), zap.Error(err))
		}
	}()
	return "http://" + ln.Addr().String(), nil
}

// unusedConns tracks a server's connections that have not sent a request
// yet, to close them on Shutdown. http.Server.Shutdown waits for such a
// connection until it is five seconds old, as if a request were coming,
// and HTTP clients leave them behind: a connection dialed for a request
// that another one then served goes idle in the client's pool without a
// request ever. devstack.Close took up to five seconds in about one service test of
// three (TestServiceEndToEnd, on kfake and on a real broker alike).
type unusedConns struct {
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func (u *unusedConns) track(c net.Conn, state http.ConnState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if state == http.StateNew {
		u.conns[c] = true
	} else {
		delete(u.conns, c)
	}
}

// close runs once Shutdown has closed the listeners, so no new connection
// comes after it. A request that would have come on one of these
// connections would have found the server stopping anyway.
func (u *unusedConns) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for c := range u.conns {
		_ = c.Close()
	}
}

// Close stops the servers and the cluster (which flushes its data). The
// registry was saved after each write. Safe to call more than once.
func (s *Stack) Close() {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, srv := range s.servers {
			_ = srv.Shutdown(ctx)
		}
		s.wg.Wait()
		if s.Cluster != nil {
			s.Cluster.Close()
		}
	})
}

// --- partner key ---

func (s *Stack) loadPartnerKey() error {
	s.PartnerKeyID = "dev-partner-key"
	if s.PartnerKeyPath != "" {
		data, err := os.ReadFile(s.PartnerKeyPath)
		switch {
		case err == nil:
			block, _ := pem.Decode(data)
			if block == nil {
				return fmt.Errorf("partner key %s: no PEM block", s.PartnerKeyPath)
			}
			key, err := x509.ParseECPrivateKey(block.Bytes)
			if err != nil {
				return fmt.Errorf("partner key %s: %w", s.PartnerKeyPath, err)
			}
			s.PartnerKey = key
			return nil
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("partner key: %w", err)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("partner key: %w", err)
	}
	s.PartnerKey = key
	if s.PartnerKeyPath == "" {
		return nil
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("partner key: %w", err)
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(s.PartnerKeyPath, pemBytes, 0o600); err != nil {
		return fmt.Errorf("partner key: %w", err)
	}
	return nil
}

// --- schema persistence ---

type savedSchema struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int    `json:"id"`
	Schema  string `json:"schema"`
	Type    string `json:"schemaType,omitempty"`
}

// loadSchemas seeds the saved schemas. srfake seeds an id only once, but a
// schema registered under several subjects (the result schema under every
// .result topic) has one id; those further subjects are returned, to be
// registered through the API once it serves, which gives them the same id.
func (s *Stack) loadSchemas() (shared []savedSchema, err error) {
	if s.schemaPath == "" {
		return nil, nil
	}
	data, err := os.ReadFile(s.schemaPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("saved schemas: %w", err)
	}
	var saved []savedSchema
	if err := json.Unmarshal(data, &saved); err != nil {
		return nil, fmt.Errorf("saved schemas %s: %w", s.schemaPath, err)
	}
	// srfake.SeedSchema panics on a clash; the file is ours but may have
	// been edited by hand, so turn that into an error naming the file.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("saved schemas %s: %v (delete the file to start afresh)", s.schemaPath, r)
		}
	}()
	seeded := map[int]bool{}
	for _, sc := range saved {
		typ := sr.TypeAvro
		if sc.Type != "" {
			if err := typ.UnmarshalText([]byte(sc.Type)); err != nil {
				return nil, fmt.Errorf("saved schemas %s: %w", s.schemaPath, err)
			}
		}
		if seeded[sc.ID] {
			shared = append(shared, sc)
			continue
		}
		seeded[sc.ID] = true
		s.Registry.SeedSchema(sc.Subject, sc.Version, sc.ID, sr.Schema{Schema: sc.Schema, Type: typ})
	}
	return shared, nil
}

func (s *Stack) registerShared(ctx context.Context, shared []savedSchema) error {
	if len(shared) == 0 {
		return nil
	}
	cl, err := sr.NewClient(sr.URLs(s.RegistryURL))
	if err != nil {
		return err
	}
	for _, sc := range shared {
		typ := sr.TypeAvro
		_ = typ.UnmarshalText([]byte(sc.Type))
		got, err := cl.CreateSchema(ctx, sc.Subject, sr.Schema{Schema: sc.Schema, Type: typ})
		if err != nil {
			return fmt.Errorf("saved schemas %s: subject %s: %w", s.schemaPath, sc.Subject, err)
		}
		if got.ID != sc.ID {
			return fmt.Errorf("saved schemas %s: subject %s got id %d, was %d (delete the file to start afresh)", s.schemaPath, sc.Subject, got.ID, sc.ID)
		}
	}
	return nil
}

func (s *Stack) saveSchemas(ctx context.Context) error {
	if s.schemaPath == "" || s.RegistryURL == "" {
		return nil
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	cl, err := sr.NewClient(sr.URLs(s.RegistryURL))
	if err != nil {
		return err
	}
	all, err := s.allSchemas(ctx, cl)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.schemaPath + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.schemaPath)
}

func (s *Stack) allSchemas(ctx context.Context, cl *sr.Client) ([]savedSchema, error) {
	subjects, err := cl.Subjects(ctx)
	if err != nil {
		return nil, err
	}
	var out []savedSchema
	for _, subject := range subjects {
		versions, err := cl.Schemas(ctx, subject)
		if err != nil {
			return nil, fmt.Errorf("subject %s: %w", subject, err)
		}
		for _, v := range versions {
			typ, _ := v.Type.MarshalText()
			out = append(out, savedSchema{Subject: subject, Version: v.Version, ID: v.ID, Schema: v.Schema.Schema, Type: string(typ)})
		}
	}
	return out, nil
}

// saveAfterWrites saves the registry after every successful write request,
// so a stack killed without Close keeps its schema ids too.
func (s *Stack) saveAfterWrites(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		if r.Method != http.MethodGet && rec.status < 300 {
			// Synchronously, through the registry's own HTTP API (the
			// server serves concurrently): when the writer sees its
			// answer, the schema is on disk.
			if err := s.saveSchemas(r.Context()); err != nil {
				s.log.Warn("saving registered schemas", zap.Error(err))
			}
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
