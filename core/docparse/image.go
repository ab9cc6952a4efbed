package docparse

import (
	"bytes"
	"fmt"
	"image"
	_ "image/gif"  // register GIF
	_ "image/jpeg" // register JPEG
	_ "image/png"  // register PNG

	_ "golang.org/x/image/webp" // register WebP
)

// ImageHeader reads a PNG, JPEG, GIF or WebP image's header: its format and
// size. It refuses an image that declares more than MaxImagePixels (a
// decompression bomb asks for its memory only when its pixels are decoded)
// with an *InvalidError. It decodes no pixel and reads only the header's
// bytes, so it is safe to call in process on untrusted data.
func ImageHeader(data []byte) (Result, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return Result{}, &InvalidError{Reason: fmt.Sprintf("not a valid PNG, JPEG, GIF or WebP image: %v", err)}
	}
	res := Result{Format: format, Width: cfg.Width, Height: cfg.Height}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Result{}, &InvalidError{Reason: fmt.Sprintf("the %s image declares %d×%d pixels", format, cfg.Width, cfg.Height)}
	}
	if int64(cfg.Width)*int64(cfg.Height) > MaxImagePixels {
		return Result{}, &InvalidError{Reason: fmt.Sprintf("the %s image declares %d×%d pixels, over the limit of %d megapixels",
			format, cfg.Width, cfg.Height, MaxImagePixels/1_000_000)}
	}
	return res, nil
}

// decodeImage checks the header, then decodes the whole image so that a
// corrupt one is refused here rather than by the model's API.
func decodeImage(data []byte) (Result, error) {
	res, err := ImageHeader(data)
	if err != nil {
		return Result{}, err
	}
	if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
		return Result{}, &InvalidError{Reason: fmt.Sprintf("the %s image is corrupt: %v", res.Format, err)}
	}
	return res, nil
}
