// optim_keys.h — every key of the DeepSpeed `optimizer` section, declared once. An X-macro list with
// no include guard, as config/zero_keys.h: a file defines ZT_OPTIM_KEY, ZT_OPTIM_SPECIAL and/or
// ZT_OPTIM_PARAM, includes this file, and gets one expansion per entry (all three are #undef'd at the
// end; an undefined one expands to nothing). Expansions:
//   cfg_optim.cpp  the reader of `params` for each optimizer kind: its ZT_OPTIM_PARAM entries in list
//                  order, each read by its key's rule, then refused when it turns on what zerotrain
//                  does not implement
//   key_table.cpp  the rows of `zerotrain check-config --keys` / docs/config-keys.md: the
//                  ZT_OPTIM_KEY and ZT_OPTIM_SPECIAL entries, in list order
//
// ZT_OPTIM_KEY(name, rule, use, why, probe, effects, context)
//   a key of optimizer.params and its reading rule (cfg_optim.cpp):
//     kNonNegative    a finite number >= 0            kAnyNumber  a finite number
//     kSwitch         true/false (or 0/1)             kNullableSwitch  null, true/false (or 0/1)
//     kBetas          a list of two numbers in [0, 1) (beta1, beta2)
// ZT_OPTIM_SPECIAL(path, use, why, probe, effects, context)
//   a key-table row only: a key of the section itself, read by hand in read_optimizer.
// ZT_OPTIM_PARAM(kind, name, default, store, refused)
//   optimizer kind `kind` (an OptimizerKind) reads `name`: the lists of one kind keep DeepSpeed's
//   parameter order (the resolved document's). default: an optim_defaults constant (the
//   optimizer's own default; kBetas: beta2's, beta1's being kAdamBeta1). store: STORE (into
//   OptimizerHparams' field of the same name) or NONE (resolved only; kBetas stores both betas).
//   refused: "" or, for a switch, the message that ends the run when the file sets it true.
// use, why, probe, effects, context: the key table's columns (config/key_table.h).

#ifndef ZT_OPTIM_KEY
#define ZT_OPTIM_KEY(name, rule, use, why, probe, effects, context)
#endif
#ifndef ZT_OPTIM_SPECIAL
#define ZT_OPTIM_SPECIAL(path, use, why, probe, effects, context)
#endif
#ifndef ZT_OPTIM_PARAM
#define ZT_OPTIM_PARAM(kind, name, def, store, refused)
#endif

ZT_OPTIM_SPECIAL("optimizer.type", kImplemented, "Adam, AdamW, SGD, Lion, Adagrad or LAMB", "\"SGD\"", "LM", "")
ZT_OPTIM_KEY(lr, kNonNegative, kImplemented, "learning rate", "0.01", "L", "")
ZT_OPTIM_KEY(betas, kBetas, kImplemented, "Adam's beta1, beta2", "[0.5,0.9]", "L", "")
ZT_OPTIM_KEY(eps, kNonNegative, kImplemented, "Adam's epsilon", "0.001", "L", "")
ZT_OPTIM_KEY(weight_decay, kNonNegative, kImplemented, "weight decay", "0.1", "L", "")
ZT_OPTIM_KEY(bias_correction, kSwitch, kImplemented, "Adam's bias correction", "false", "L", "")
ZT_OPTIM_KEY(adam_w_mode, kSwitch, kImplemented, "type Adam: false couples the weight decay into the gradient", "false",
             "L", kAdam)
ZT_OPTIM_KEY(amsgrad, kSwitch, kRejected, "AMSGrad (DeepSpeed's FusedAdam rejects it too)", "true", "", "")
ZT_OPTIM_KEY(torch_adam, kSwitch, kNotUsed, "zerotrain's Adam is the same arithmetic either way", "true", "", "")
ZT_OPTIM_KEY(fp32_optimizer_states, kSwitch, kNotUsed, "states are fp32 unless bf16.bf16_optimizer_states", "false", "",
             "")
ZT_OPTIM_KEY(set_grad_none, kSwitch, kNotUsed, "gradient buffers are zeroed in place", "false", "", "")
ZT_OPTIM_SPECIAL("optimizer.legacy_fusion", kNotUsed, "a DeepSpeed FP16_Optimizer switch with no counterpart", "true", "",
                 "")
ZT_OPTIM_KEY(momentum, kNonNegative, kImplemented, "SGD momentum", "0.5", "L", kSgd)
ZT_OPTIM_KEY(dampening, kAnyNumber, kImplemented, "SGD dampening", "0.5", "L", kSgd)
ZT_OPTIM_KEY(nesterov, kSwitch, kImplemented, "SGD Nesterov momentum", "true", "L", kSgd)
ZT_OPTIM_KEY(maximize, kSwitch, kRejected, "maximizing SGD", "true", "", kSgd)
ZT_OPTIM_KEY(lr_decay, kNonNegative, kImplemented, "Adagrad: lr / (1 + (step - 1) lr_decay)", "0.5", "L", kAdagrad)
ZT_OPTIM_KEY(initial_accumulator_value, kNonNegative, kImplemented, "Adagrad: starting sum of squared gradients", "1.0",
             "L", kAdagrad)
ZT_OPTIM_KEY(max_coeff, kNonNegative, kImplemented, "LAMB: upper bound of the trust ratio", "0.02", "L", kLamb)
ZT_OPTIM_KEY(min_coeff, kNonNegative, kImplemented, "LAMB: lower bound of the trust ratio", "0.5", "L", kLamb)
ZT_OPTIM_KEY(eps_inside_sqrt, kSwitch, kImplemented, "LAMB: eps under the square root of the second moment", "true", "L",
             kLamb)
ZT_OPTIM_KEY(foreach, kNullableSwitch, kNotUsed, "a torch implementation switch", "true", "", kSgd)
ZT_OPTIM_KEY(differentiable, kSwitch, kNotUsed, "a torch implementation switch", "true", "", kSgd)
ZT_OPTIM_KEY(fused, kNullableSwitch, kNotUsed, "a torch implementation switch", "true", "", kSgd)

// FusedAdam / DeepSpeedCPUAdam ("adam", "adamw"; the effective adam_w_mode is type "adamw" || adam_w_mode)
ZT_OPTIM_PARAM(Adam, lr, optim_defaults::kLr, STORE, "")
ZT_OPTIM_PARAM(Adam, betas, optim_defaults::kAdamBeta2, NONE, "")
ZT_OPTIM_PARAM(Adam, eps, optim_defaults::kAdamEps, STORE, "")
ZT_OPTIM_PARAM(Adam, weight_decay, optim_defaults::kWeightDecay, STORE, "")
ZT_OPTIM_PARAM(Adam, bias_correction, optim_defaults::kAdamBiasCorrection, STORE, "")
ZT_OPTIM_PARAM(Adam, adam_w_mode, optim_defaults::kAdamWMode, STORE, "")
ZT_OPTIM_PARAM(Adam, amsgrad, false, NONE, "true is not supported (DeepSpeed's FusedAdam rejects it too)")
ZT_OPTIM_PARAM(Adam, torch_adam, false, NONE, "")
ZT_OPTIM_PARAM(Adam, fp32_optimizer_states, true, NONE, "")
ZT_OPTIM_PARAM(Adam, set_grad_none, true, NONE, "")
// torch.optim.SGD
ZT_OPTIM_PARAM(SGD, lr, optim_defaults::kLr, STORE, "")
ZT_OPTIM_PARAM(SGD, momentum, optim_defaults::kSgdMomentum, STORE, "")
ZT_OPTIM_PARAM(SGD, dampening, optim_defaults::kSgdDampening, STORE, "")
ZT_OPTIM_PARAM(SGD, weight_decay, optim_defaults::kWeightDecay, STORE, "")
ZT_OPTIM_PARAM(SGD, nesterov, false, STORE, "")
ZT_OPTIM_PARAM(SGD, maximize, false, NONE, "true is not supported by zerotrain")
ZT_OPTIM_PARAM(SGD, foreach, false, NONE, "")
ZT_OPTIM_PARAM(SGD, fused, false, NONE, "")
ZT_OPTIM_PARAM(SGD, differentiable, false, NONE, "")
// FusedLion (set_grad_none) and DeepSpeedCPULion (fp32_optimizer_states): the union is accepted
ZT_OPTIM_PARAM(Lion, lr, optim_defaults::kLr, STORE, "")
ZT_OPTIM_PARAM(Lion, betas, optim_defaults::kLionBeta2, NONE, "")
ZT_OPTIM_PARAM(Lion, weight_decay, optim_defaults::kWeightDecay, STORE, "")
ZT_OPTIM_PARAM(Lion, set_grad_none, true, NONE, "")
ZT_OPTIM_PARAM(Lion, fp32_optimizer_states, true, NONE, "")
// torch.optim.Adagrad (no offload) and DeepSpeedCPUAdagrad (offload): the union is accepted
ZT_OPTIM_PARAM(Adagrad, lr, optim_defaults::kAdagradLr, STORE, "")
ZT_OPTIM_PARAM(Adagrad, lr_decay, 0.0, STORE, "")
ZT_OPTIM_PARAM(Adagrad, weight_decay, optim_defaults::kWeightDecay, STORE, "")
ZT_OPTIM_PARAM(Adagrad, initial_accumulator_value, 0.0, STORE, "")
ZT_OPTIM_PARAM(Adagrad, eps, optim_defaults::kAdagradEps, STORE, "")
ZT_OPTIM_PARAM(Adagrad, maximize, false, NONE, "true is not supported by zerotrain")
ZT_OPTIM_PARAM(Adagrad, amsgrad, false, NONE, "true is not supported (Adagrad has no AMSGrad variant)")
ZT_OPTIM_PARAM(Adagrad, fp32_optimizer_states, true, NONE, "")
ZT_OPTIM_PARAM(Adagrad, foreach, false, NONE, "")
ZT_OPTIM_PARAM(Adagrad, fused, false, NONE, "")
ZT_OPTIM_PARAM(Adagrad, differentiable, false, NONE, "")
// FusedLamb
ZT_OPTIM_PARAM(Lamb, lr, optim_defaults::kLr, STORE, "")
ZT_OPTIM_PARAM(Lamb, bias_correction, optim_defaults::kAdamBiasCorrection, STORE, "")
ZT_OPTIM_PARAM(Lamb, betas, optim_defaults::kAdamBeta2, NONE, "")
ZT_OPTIM_PARAM(Lamb, eps, optim_defaults::kAdamEps, STORE, "")
ZT_OPTIM_PARAM(Lamb, eps_inside_sqrt, false, STORE, "")
ZT_OPTIM_PARAM(Lamb, weight_decay, optim_defaults::kWeightDecay, STORE, "")
ZT_OPTIM_PARAM(Lamb, max_coeff, optim_defaults::kLambMaxCoeff, STORE, "")
ZT_OPTIM_PARAM(Lamb, min_coeff, optim_defaults::kLambMinCoeff, STORE, "")
ZT_OPTIM_PARAM(Lamb, amsgrad, false, NONE, "true is not supported (DeepSpeed's FusedLamb rejects it too)")

#undef ZT_OPTIM_KEY
#undef ZT_OPTIM_SPECIAL
#undef ZT_OPTIM_PARAM
