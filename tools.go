//go:build tools

// Package tools pins modules that later issues use, so go mod tidy keeps them.
package tools

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/buraksezer/consistent"
	_ "github.com/cenkalti/backoff/v5"
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/hashicorp/memberlist"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "github.com/maypok86/otter/v2"
	_ "github.com/pquerna/cachecontrol"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/vmihailenco/msgpack/v5"
	_ "go.etcd.io/bbolt"
	_ "go.uber.org/goleak"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sync/singleflight"
	_ "golang.org/x/time/rate"
)
