package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/levee/levee/jepsen-lite/checker"
	"github.com/levee/levee/jepsen-lite/history"
)

// History file names inside a run directory.
const (
	OpsFile        = "ops.jsonl"
	UpstreamFile   = "upstream.jsonl"
	BreakersFile   = "breakers.jsonl"
	MembershipFile = "membership.jsonl"
	FaultsFile     = "faults.jsonl"
	JobsFile       = "jobs.jsonl"
	JobStatesFile  = "job_states.jsonl"
	ResourcesFile  = "resources.jsonl" // a soak run's samples
	MetaFile       = "meta.json"
)

// ErrBadHistory wraps every error reading a saved history.
var ErrBadHistory = errors.New("report: bad history")

// maxLine bounds one JSONL line.
const maxLine = 1 << 20

// Save writes h into dir, creating it.
func Save(dir string, h *checker.History) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	meta, err := json.MarshalIndent(h.Meta, "", "  ")
	if err != nil {
		return err
	}
	return errors.Join(
		os.WriteFile(filepath.Join(dir, MetaFile), append(meta, '\n'), 0o644),
		writeJSONL(filepath.Join(dir, OpsFile), h.Ops),
		writeJSONL(filepath.Join(dir, UpstreamFile), h.Upstream),
		writeJSONL(filepath.Join(dir, BreakersFile), h.Breakers),
		writeJSONL(filepath.Join(dir, MembershipFile), h.Members),
		writeJSONL(filepath.Join(dir, FaultsFile), h.Faults),
		writeJSONL(filepath.Join(dir, JobsFile), h.Enqueues),
		writeJSONL(filepath.Join(dir, JobStatesFile), h.JobStates),
		writeResources(dir, h.Resources),
	)
}

// writeResources saves a soak run's samples; a run without them gets no
// file.
func writeResources(dir string, rs []history.Resources) error {
	if len(rs) == 0 {
		return nil
	}
	return writeJSONL(filepath.Join(dir, ResourcesFile), rs)
}

func writeJSONL[T any](path string, rows []T) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(w.Flush(), f.Close())
}

// Load reads a history saved by Save.
func Load(dir string) (*checker.History, error) {
	h := &checker.History{}
	data, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadHistory, err)
	}
	if err := json.Unmarshal(data, &h.Meta); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadHistory, MetaFile, err)
	}
	err = errors.Join(
		readFile(dir, OpsFile, &h.Ops),
		readFile(dir, UpstreamFile, &h.Upstream),
		readFile(dir, BreakersFile, &h.Breakers),
		readFile(dir, MembershipFile, &h.Members),
		readFile(dir, FaultsFile, &h.Faults),
		readOptional(dir, JobsFile, &h.Enqueues),
		readOptional(dir, JobStatesFile, &h.JobStates),
		readOptional(dir, ResourcesFile, &h.Resources),
	)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func readFile[T any](dir, name string, out *[]T) error {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadHistory, err)
	}
	defer f.Close()
	rows, err := DecodeJSONL[T](f)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	*out = rows
	return nil
}

// readOptional is readFile for a file a history saved before it existed
// does not have: a missing file leaves out empty.
func readOptional[T any](dir, name string, out *[]T) error {
	if _, err := os.Stat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return readFile(dir, name, out)
}

// DecodeJSONL reads one JSON value of type T per non-empty line.
func DecodeJSONL[T any](r io.Reader) ([]T, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var out []T
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrBadHistory, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadHistory, err)
	}
	return out, nil
}

// decodeOps is DecodeJSONL for ops, named for the fuzz test.
func decodeOps(r io.Reader) ([]history.Op, error) { return DecodeJSONL[history.Op](r) }
