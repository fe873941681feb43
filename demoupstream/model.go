package demoupstream

import (
	"encoding/json"
	"fmt"
	"time"
)

// Envelope is every /api/ body. Checkers decode it to verify what a client
// got: whose data (Tenant), which resource (Key), how fresh (Version,
// FetchedAt).
type Envelope struct {
	// Tenant is the request's X-Tenant header, "" without one.
	Tenant string `json:"tenant"`
	// Key is the path plus canonical query (see KeyOf).
	Key string `json:"key"`
	// Version is the content generation of (Tenant, Key); for a job, the
	// tenant's job sequence number; for a session answer, the Server's
	// session sequence number (it goes up with every such answer); 0 on
	// errors.
	Version int64 `json:"version"`
	// FetchedAt is the server time the body was produced (RFC 3339, ns).
	FetchedAt time.Time `json:"fetched_at"`
	// NodeHint echoes the X-Levee-Node request header, so a checker can see
	// which Levee node made the upstream call.
	NodeHint string `json:"node_hint"`
	// Data is the resource (Story, []Comment, User, Job, Session); absent
	// on errors.
	Data json.RawMessage `json:"data,omitempty"`
	// Error is set on every non-2xx body.
	Error *APIError `json:"error,omitempty"`
}

// Story is the data of GET /api/stories/{id}.
type Story struct {
	ID           string `json:"id"`
	Title        string `json:"title"`
	By           string `json:"by"`
	Score        int64  `json:"score"`
	CommentCount int    `json:"comment_count"`
}

// Comment is one element of GET /api/stories/{id}/comments.
type Comment struct {
	ID      string `json:"id"`
	StoryID string `json:"story_id"`
	By      string `json:"by"`
	Text    string `json:"text"`
}

// User is the data of GET /api/users/{name}.
type User struct {
	Name  string `json:"name"`
	Karma int64  `json:"karma"`
	About string `json:"about"`
}

// Job is the data of POST /api/jobs.
type Job struct {
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Payload json.RawMessage `json:"payload"`
}

// commentsPerStory is fixed so a checker knows the list length.
const commentsPerStory = 3

// The builders are pure functions of (tenant, id, version): equal ETags
// always mean equal data.

func buildStory(tenant, id string, gen int64) Story {
	n := seedOf(id)
	return Story{
		ID:           id,
		Title:        fmt.Sprintf("Story %s for %q (rev %d)", id, tenant, gen),
		By:           fmt.Sprintf("user%d", n%50),
		Score:        n + gen,
		CommentCount: commentsPerStory,
	}
}

func buildComments(tenant, id string, gen int64) []Comment {
	out := make([]Comment, commentsPerStory)
	for i := range out {
		out[i] = Comment{
			ID:      fmt.Sprintf("%s-c%d", id, i+1),
			StoryID: id,
			By:      fmt.Sprintf("user%d", (seedOf(id)+int64(i))%50),
			Text:    fmt.Sprintf("comment %d on story %s for %q (rev %d)", i+1, id, tenant, gen),
		}
	}
	return out
}

func buildUser(tenant, name string, gen int64) User {
	return User{
		Name:  name,
		Karma: seedOf(name)*10 + gen,
		About: fmt.Sprintf("%s of %q (rev %d)", name, tenant, gen),
	}
}
