// token_model.h — what the token models (GPT, Llama) share (private to csrc/model): the batch's
// validation and upload, the buffers allocated by name from the model's buffer plan, the block
// inputs (the residual stream, optionally kept in host memory: host_checkpoints.h) and the LM head
// over padded logits rows (vocab_pad.h) with its loss.
//
// Buffers every token model lists (N = micro_batch · n_ctx rows, e = compute dtype size):
//   tokens, targets   int32 [N]
//   residual.l        [N,C], l = 0..L (block l's input; residual.L feeds the final norm), or under
//                     cpu_checkpointing residual.slot0/1 + host.residual.l (l <= L-2, host memory)
//   lnf [N,C] (+ lnf_mean [N] fp32 for LayerNorm), lnf_rstd [N] fp32, logits [N,Vp], losses [N] fp32
// The head's forward leaves softmax − onehot in logits (the unit-dloss logit gradient); its
// backward scales by dloss / N_t inside the gemms (N_t: positions whose target is not ignored).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host_checkpoints.h"
#include "model_base.h"
#include "zerotrain/model/vocab_pad.h"

namespace zt::model_detail {

// cpu_checkpointing applies: recompute keeps block inputs and there is a block input to move.
bool uses_host_checkpoints(const ModelOptions& opt, int64_t n_layer);
// The device buffer holding residual[l].
std::string residual_buffer_name(const ModelOptions& opt, int64_t n_layer, int64_t l);
// The LM head's logits layout under opt (Vp per opt.vocab_pad or the device's default).
VocabLayout token_vocab_layout(int64_t vocab_size, const ModelOptions& opt);
// Plan pieces, in the order the models list them: tokens, targets and the residual stream ...
void add_input_buffers(std::vector<BufferSpec>& out, const ModelOptions& opt, int64_t n_ctx, int64_t C, int64_t n_layer);
// ... and the head: lnf, lnf_mean (with_mean), lnf_rstd, logits, losses.
void add_head_buffers(std::vector<BufferSpec>& out, const ModelOptions& opt, int64_t n_ctx, int64_t C, int64_t vocab_size,
                      bool with_mean);

class TokenModel : public ModelBase {
 public:
  ~TokenModel() override { stream_.synchronize(); }  // enqueued work may still use the buffers
  // InputError (naming the model kind) for a shape or token outside the model; copies the tokens.
  void set_batch(const Batch& b) override;
  bool uses_side_stream() const override { return host_ckpt_ != nullptr; }
  int num_units() const override { return static_cast<int>(n_layer_) + 2; }
  int64_t hidden_size() const override { return C_; }
  // A tied head (its weight owned by unit 0, the embedding) is listed for the last unit too.
  std::vector<int> unit_params(int unit) const override;
  // Unit 0: embeddings; 1..L: block unit-1; L+1: final norm, head and loss.
  void forward_unit(int unit) override;
  void backward_unit(int unit, float dloss) override;
  // logits = lnf · W_headᵀ recomputed into a temporary buffer (the logits buffer holds the
  // forward's softmax − onehot), the V real columns as fp32.
  std::vector<float> forward_logits() override;

 protected:
  // kind: "gpt" | "llama" (messages); C: the residual width. The subclass adds its params and
  // sets head_w_, the LM head weight's index.
  TokenModel(const ModelOptions& opt, const char* kind, int64_t vocab_size, int64_t n_ctx, int64_t C, int64_t n_layer);

  virtual void embed_forward() = 0;
  virtual void block_forward(int l) = 0;
  virtual void head_forward() = 0;
  virtual void embed_backward() = 0;
  virtual void block_backward(int l) = 0;  // dres: d residual[l+1] in, d residual[l] out
  virtual void head_backward(float dloss) = 0;

  // Allocates exactly plan's buffers past ModelBase's (the memory prediction is the plan's sum)
  // and binds the shared ones listed above.
  void allocate(const std::vector<BufferSpec>& plan);
  const DeviceBuffer& buf(const std::string& name) const;
  int64_t N() const { return B_ * T_; }
  size_t residual_bytes() const;
  // Host checkpoint hooks around writes / reads of residual[l] (no-ops without cpu_checkpointing).
  void before_residual_write(int l) { if (host_ckpt_) host_ckpt_->before_write(l); }
  void after_residual_write(int l) { if (host_ckpt_) host_ckpt_->after_write(l, residual_bytes()); }
  void before_block_backward(int l);

  // After the final norm filled lnf: logits over the V real columns, losses, the mean loss.
  void lm_head_forward();
  // dW_head += α·dlogitsᵀ·lnf, dC[N,C] = α·dlogits·W_head (overwrites), α = dloss / N_t.
  void lm_head_backward(float dloss, const TensorView& dC);

  const char* kind_;
  int64_t vocab_size_, n_ctx_, C_, n_layer_;
  VocabLayout vocab_;
  int head_w_ = -1;
  int64_t B_ = 0, T_ = 0;                      // shape of the current batch (set_batch)
  std::map<std::string, DeviceBuffer> bufs_;   // every buffer past ModelBase's, by plan name
  const DeviceBuffer *tokens_ = nullptr, *targets_ = nullptr;  // int32 [B,T] on the device
  std::vector<const DeviceBuffer*> residual_;  // L+1 block inputs
  const DeviceBuffer *lnf_ = nullptr, *logits_ = nullptr, *losses_ = nullptr;
  // cpu_checkpointing; declared after bufs_, so it drains its copy stream before they are freed.
  std::unique_ptr<HostCheckpoints> host_ckpt_;
};

}  // namespace zt::model_detail
