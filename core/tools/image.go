package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/docparse"
)

// MaxImageBytes caps an image sent to the model.
const MaxImageBytes = 5 << 20

// ReadImage returns a PNG, JPEG, GIF or WebP file as an image part, the
// format detected from the content, not the name.
//
// The image's header is read in process (docparse.ImageHeader: bounded, it
// decodes no pixel), which refuses an image that declares more than
// docparse.MaxImagePixels; then Parser decodes the whole image in a child
// process, with its time and memory limits, so that a corrupt image is
// refused here rather than by the model's API. Without a Parser the image is
// sent after the header check alone.
type ReadImage struct {
	Parser Parser
}

type imageArgs struct {
	Path string `json:"path"`
}

// Name implements Tool.
func (ReadImage) Name() string { return "ReadImage" }

// Description implements Tool.
func (ReadImage) Description(tx *catalog.Texts) string {
	return tx.Fill("tools.image.description", "mb", itoa(MaxImageBytes>>20))
}

// Schema implements Tool.
func (ReadImage) Schema(tx *catalog.Texts) json.RawMessage {
	return schema(tx, "image", `{"type":"object","properties":{`+
		`"path":{"type":"string","description":$path}},`+
		`"required":["path"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t ReadImage) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a imageArgs
	if err := decode(raw, &a); err != nil {
		return env.fail(t.Name(), "", err)
	}
	if a.Path == "" {
		return env.fail(t.Name(), "", fault("tools.err.path_required"))
	}
	f, fi, err := env.WS.OpenRead(a.Path)
	if err != nil {
		return env.fail(t.Name(), a.Path, err)
	}
	defer f.Close()
	if fi.Size() > MaxImageBytes {
		return env.fail(t.Name(), a.Path, fault("tools.image.too_big", "path", quote(a.Path), "size", itoa(fi.Size()), "mb", itoa(MaxImageBytes>>20)))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxImageBytes+1))
	if err != nil {
		return env.fail(t.Name(), a.Path, fmt.Errorf("read %s: %w", a.Path, unwrapPath(err)))
	}
	mime := http.DetectContentType(data)
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
	default:
		return env.fail(t.Name(), a.Path, fault("tools.image.not_image", "path", quote(a.Path), "mime", mime))
	}
	hdr, err := docparse.ImageHeader(data)
	if err == nil && t.Parser != nil {
		hdr, err = t.Parser.Parse(ctx, docparse.Image, bytes.NewReader(data))
	}
	if err != nil {
		return parseFailure(env, t.Name(), a.Path, err)
	}
	desc := env.say("tools.image.done", "path", a.Path, "mime", mime, "size", itoa(len(data)), "width", itoa(hdr.Width), "height", itoa(hdr.Height))
	return Result{Text: desc, Images: []Image{{MIME: mime, Data: data}}}
}
