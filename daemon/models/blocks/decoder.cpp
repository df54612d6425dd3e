#include "decoder.hpp"

#include <algorithm>
#include <cmath>

namespace spite::models {
namespace {

// x = cap * tanh(x * (1 / cap)): the reference's scale, tanh, scale
void softcap(float* x, std::int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (std::int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

// x += norm(delta) (sandwich norms) or x += delta
void add_residual(forward_context& ctx, std::vector<float>& x, std::vector<float>& delta, const std::vector<float>& post_norm,
                  std::int64_t E, float eps) {
  const auto rows = static_cast<std::int64_t>(x.size()) / E;
  if (!post_norm.empty()) rms_norm_rows(ctx, delta.data(), post_norm.data(), delta.data(), E, rows, eps);
  for_row_blocks(ctx, rows, E, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin * E; i < end * E; ++i) x[static_cast<std::size_t>(i)] += delta[static_cast<std::size_t>(i)];
  });
}

}  // namespace

void embedding_row(const gguf::file* file, const gguf::tensor_info& table, std::int64_t r, std::int64_t n, float* out) {
  const dispatch::weight embd = dispatch::weight_of(table);
  const gguf::type_traits& tr = gguf::traits(embd.type);
  if (file != nullptr) {
    thread_local std::vector<std::byte> bytes;
    bytes.resize(embd.row_bytes);
    if (file->read(table, static_cast<std::uint64_t>(r) * embd.row_bytes, bytes)) {
      tr.to_float(bytes.data(), out, n);
      return;
    }
  }
  tr.to_float(embd.row(r), out, n);  // parse()d bytes, or a read error: the mapping's bytes
}

void embed_tokens(forward_context& ctx, const decoder_weights& w, const decoder_config& c, std::int64_t E, float* x) {
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  for (std::int64_t t = 0; t < n; ++t) embedding_row(w.file, *w.token_embd, ctx.batch.tokens[static_cast<std::size_t>(t)], E, x + t * E);
  if (c.embed_scale > 0.0f) {
    for (std::int64_t i = 0; i < E * n; ++i) x[i] *= c.embed_scale;
  }
}

void output_head(forward_context& ctx, const decoder_weights& w, const decoder_config& c, std::int64_t E, const float* x) {
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  // Embeddings: the final-normed state of every token, for pooling by the caller.
  if (ctx.hidden != nullptr) rms_norm_rows(ctx, x, w.output_norm.data(), ctx.hidden, E, n, c.rms_eps);
  // Output head, only for the rows whose logits were asked for.
  const auto m = static_cast<std::int64_t>(ctx.batch.outputs.size());
  if (m == 0) return;
  std::vector<float> h(static_cast<std::size_t>(E * m));
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t t = ctx.batch.outputs[static_cast<std::size_t>(i)];
    std::copy(x + t * E, x + (t + 1) * E, h.data() + i * E);
  }
  rms_norm_rows(ctx, h.data(), w.output_norm.data(), h.data(), E, m, c.rms_eps);
  w.output.apply(ctx, h.data(), m, ctx.logits);
  if (c.final_softcap > 0.0f) softcap(ctx.logits, m * w.output.w.out, c.final_softcap);
}

result<void> decoder_forward(forward_context& ctx, const decoder_weights& w, const decoder_config& c, const hparams& hp) {
  const std::int64_t E = hp.n_embd;
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  std::vector<float> x(static_cast<std::size_t>(E * n)), cur(x.size()), delta(x.size());
  embed_tokens(ctx, w, c, E, x.data());

  const float* freqs = w.rope_freqs.empty() ? nullptr : w.rope_freqs.data();
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    const attention_layer& a = w.attn[static_cast<std::size_t>(il)];
    rms_norm_rows(ctx, x.data(), a.norm.data(), cur.data(), E, n, c.rms_eps);
    attention_block(ctx, a, c, il, freqs, cur.data(), delta.data());
    add_residual(ctx, x, delta, a.post_norm, E, c.rms_eps);

    const ffn_layer& f = w.ffn[static_cast<std::size_t>(il)];
    rms_norm_rows(ctx, x.data(), f.norm.data(), cur.data(), E, n, c.rms_eps);
    ffn_block(ctx, f, c, cur.data(), delta.data());
    add_residual(ctx, x, delta, f.post_norm, E, c.rms_eps);
  }

  output_head(ctx, w, c, E, x.data());
  return ok();
}

}  // namespace spite::models
