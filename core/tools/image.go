package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

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
func (ReadImage) Description() string {
	return fmt.Sprintf("Look at an image file in the workspace (PNG, JPEG, GIF or WebP, at most %d MB).", MaxImageBytes>>20)
}

// Schema implements Tool.
func (ReadImage) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"image path relative to the workspace"}},` +
		`"required":["path"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t ReadImage) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a imageArgs
	if err := decode(raw, &a); err != nil {
		return failure(t.Name(), err)
	}
	if a.Path == "" {
		return Errorf("ReadImage: path is required")
	}
	f, fi, err := env.WS.OpenRead(a.Path)
	if err != nil {
		return failure(t.Name(), err)
	}
	defer f.Close()
	if fi.Size() > MaxImageBytes {
		return Errorf("ReadImage: %s is %d bytes, over the %d MB limit; make a smaller copy with Bash (e.g. ImageMagick's convert -resize) if it is installed",
			a.Path, fi.Size(), MaxImageBytes>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxImageBytes+1))
	if err != nil {
		return failure(t.Name(), fmt.Errorf("read %s: %w", a.Path, unwrapPath(err)))
	}
	mime := http.DetectContentType(data)
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
	default:
		return Errorf("ReadImage: %s is not a PNG, JPEG, GIF or WebP image (its content looks like %s)", a.Path, mime)
	}
	hdr, err := docparse.ImageHeader(data)
	if err == nil && t.Parser != nil {
		hdr, err = t.Parser.Parse(ctx, docparse.Image, bytes.NewReader(data))
	}
	if err != nil {
		return parseFailure(t.Name(), a.Path, err, env.logger())
	}
	desc := fmt.Sprintf("%s: %s, %d bytes, %d×%d pixels", a.Path, mime, len(data), hdr.Width, hdr.Height)
	return Result{Text: desc, Images: []Image{{MIME: mime, Data: data}}}
}
