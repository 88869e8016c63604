"""BERT for pretraining (masked LM + next sentence prediction), in Keras 3.

Only keras.ops and keras.layers are used here, so the same model runs on the TensorFlow and JAX backends.
The architecture follows the original BERT: post-LayerNorm Transformer blocks with exact (erf) GELU,
learned position embeddings, a tanh pooler on [CLS], a masked-LM head whose output projection is tied
to the token embeddings, and a 2-way next-sentence head (left out for records without a pair objective).
"""

from __future__ import annotations

import math

import keras
from keras import layers, ops

from bertcorpus.trainer.config import BertConfig

LAYER_NORM_EPSILON = 1e-12  # BERT's value; the statistics are computed in float32 under mixed precision.
MASK_BIAS = -10000.0  # added to attention scores of padding; exp() of it is 0 in float32.


def _init(config: BertConfig) -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


def gelu(x):
    return ops.gelu(x, approximate=False)


class Embeddings(layers.Layer):
    """Token + learned position + segment embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(**kwargs)
        self.token = layers.Embedding(
            config.vocab_size, config.hidden_size, embeddings_initializer=_init(config), name="token"
        )
        self.position = layers.Embedding(
            config.max_position, config.hidden_size, embeddings_initializer=_init(config), name="position"
        )
        self.segment = layers.Embedding(
            config.type_vocab_size, config.hidden_size, embeddings_initializer=_init(config), name="segment"
        )
        self.norm = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="norm")
        self.dropout = layers.Dropout(config.dropout)

    def call(self, input_ids, segment_ids, position_ids=None, training=False):
        """position_ids: (batch, seq), for rows that hold several instances (the packed layout); default 0, 1, ..."""
        if position_ids is None:
            position = self.position(ops.arange(ops.shape(input_ids)[1]))[None]
        else:
            position = self.position(position_ids)
        x = self.token(input_ids) + self.segment(segment_ids) + position
        return self.dropout(self.norm(x), training=training)


class TransformerBlock(layers.Layer):
    """Post-LN block: x = LN(x + Attention(x)); x = LN(x + FFN(x))."""

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(**kwargs)
        if config.hidden_size % config.num_heads:
            raise ValueError(f"hidden_size {config.hidden_size} is not a multiple of num_heads {config.num_heads}")
        self.num_heads = config.num_heads
        self.head_size = config.hidden_size // config.num_heads
        self.qkv = layers.Dense(
            3 * config.hidden_size, kernel_initializer=_init(config), name="qkv"
        )  # one matmul for Q, K and V
        self.attention_output = layers.Dense(
            config.hidden_size, kernel_initializer=_init(config), name="attention_output"
        )
        self.attention_norm = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="attention_norm")
        self.intermediate = layers.Dense(
            config.intermediate_size, activation=gelu, kernel_initializer=_init(config), name="intermediate"
        )
        self.output_dense = layers.Dense(config.hidden_size, kernel_initializer=_init(config), name="output")
        self.output_norm = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="output_norm")
        self.attention_dropout = layers.Dropout(config.dropout)
        self.dropout = layers.Dropout(config.dropout)

    def call(self, x, attention_bias, training=False):
        seq_len, hidden = ops.shape(x)[1], ops.shape(x)[2]
        qkv = ops.reshape(self.qkv(x), (-1, seq_len, 3, self.num_heads, self.head_size))
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # each (batch, seq, heads, head_size)
        scores = ops.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(self.head_size))
        # Softmax in float32: under bf16/fp16 the row sums of 512 exponentials lose too much precision.
        # (Keras casts float arguments of a layer call to its compute dtype, so the bias arrives as bf16/fp16.)
        probs = ops.softmax(ops.cast(scores, "float32") + ops.cast(attention_bias, "float32"), axis=-1)
        probs = self.attention_dropout(ops.cast(probs, x.dtype), training=training)
        context = ops.reshape(ops.einsum("bhqk,bkhd->bqhd", probs, v), (-1, seq_len, hidden))
        x = self.attention_norm(x + self.dropout(self.attention_output(context), training=training))
        h = self.output_dense(self.intermediate(x))
        return self.output_norm(x + self.dropout(h, training=training))


class BertPretrainer(keras.Model):
    """Maps a batch of pretraining features to masked-LM and next-sentence logits (float32).

    Inputs (a dict, as read from the records): input_ids, input_mask, segment_ids (batch, seq) and
    masked_lm_positions (batch, predictions). The masked-LM head runs only at masked_lm_positions. Without a pair
    head (config.pair_head False) the outputs have no nsp_logits.
    """

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.embeddings = Embeddings(config, name="embeddings")
        self.blocks = [TransformerBlock(config, name=f"layer_{i}") for i in range(config.num_layers)]
        if config.pair_head:
            self.pooler = layers.Dense(
                config.hidden_size, activation="tanh", kernel_initializer=_init(config), name="pooler"
            )
        self.mlm_dense = layers.Dense(
            config.hidden_size, activation=gelu, kernel_initializer=_init(config), name="mlm_dense"
        )
        self.mlm_norm = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="mlm_norm")
        self.mlm_bias = self.add_weight(shape=(config.vocab_size,), initializer="zeros", name="mlm_bias")
        if config.pair_head:
            self.nsp = layers.Dense(2, kernel_initializer=_init(config), name="nsp")

    def call(self, inputs, training=False):
        mask = ops.cast(inputs["input_mask"], "float32")
        attention_bias = (1.0 - mask)[
            :, None, None, :
        ] * MASK_BIAS  # (batch, 1, 1, seq): broadcast over heads and queries
        x = self.embeddings(inputs["input_ids"], inputs["segment_ids"], training=training)
        for block in self.blocks:
            x = block(x, attention_bias, training=training)

        outputs = {}
        if self.config.pair_head:
            outputs["nsp_logits"] = ops.cast(self.nsp(self.pooler(x[:, 0])), "float32")

        positions = ops.cast(inputs["masked_lm_positions"], "int32")
        h = ops.take_along_axis(x, positions[:, :, None], axis=1)  # (batch, predictions, hidden)
        h = self.mlm_norm(self.mlm_dense(h))
        token_embeddings = ops.cast(self.embeddings.token.embeddings, h.dtype)
        mlm_logits = ops.einsum("bph,vh->bpv", h, token_embeddings)
        # The bias reads as bf16/fp16 under mixed precision.
        outputs["mlm_logits"] = ops.cast(mlm_logits, "float32") + ops.cast(self.mlm_bias, "float32")
        return outputs

    def packed_outputs(self, batch, training=False):
        """The logits of a batch in the loader's packed layout (trainer/packed_layout.py): one stream of instances,
        each attending only to itself (a block-diagonal mask from the restarts of position_ids), at their own
        positions. mlm_logits (tokens, vocab) at every token; nsp_logits (instances, 2) from each [CLS]."""
        position_ids = ops.cast(batch["position_ids"], "int32")
        instance = ops.cumsum(ops.cast(position_ids == 0, "int32")) - 1  # the instance of each token
        same = ops.cast(instance[:, None] == instance[None, :], "float32")
        attention_bias = ((1.0 - same) * MASK_BIAS)[None, None]  # (1, 1, tokens, tokens)
        x = self.embeddings(
            batch["input_ids"][None], batch["token_type_ids"][None], position_ids[None], training=training
        )
        for block in self.blocks:
            x = block(x, attention_bias, training=training)
        x = x[0]
        outputs = {}
        if self.config.pair_head:
            starts = ops.cast(batch["cu_seqlens"][:-1], "int32")
            outputs["nsp_logits"] = ops.cast(self.nsp(self.pooler(ops.take(x, starts, axis=0))), "float32")
        h = self.mlm_norm(self.mlm_dense(x))
        logits = ops.einsum("th,vh->tv", h, ops.cast(self.embeddings.token.embeddings, h.dtype))
        outputs["mlm_logits"] = ops.cast(logits, "float32") + ops.cast(self.mlm_bias, "float32")
        return outputs


def packed_pretraining_loss(outputs, batch):
    """pretraining_loss for the packed layout: the masked-LM mean over the tokens whose label is not -100 (with the
    same 1e-5 as the padded batch's weights), plus the mean next-sentence loss where there is a pair head."""
    labels = ops.cast(batch["labels"], "int32")
    predicted = ops.cast(labels >= 0, "float32")
    nll = ops.sparse_categorical_crossentropy(ops.maximum(labels, 0), outputs["mlm_logits"], from_logits=True)
    mlm_loss = ops.sum(predicted * nll) / (ops.sum(predicted) + 1e-5)
    if "nsp_logits" not in outputs:
        return mlm_loss, mlm_loss, None
    nsp_loss = ops.mean(
        ops.sparse_categorical_crossentropy(batch["next_sentence_label"], outputs["nsp_logits"], from_logits=True)
    )
    return mlm_loss + nsp_loss, mlm_loss, nsp_loss


def dummy_batch(batch_size: int, seq_len: int, predictions: int) -> dict[str, object]:
    """An all-padding batch with the record layout; calling the model on it creates the weights."""
    ids = ops.zeros((batch_size, seq_len), dtype="int32")
    return {
        "input_ids": ids,
        "input_mask": ops.ones((batch_size, seq_len), dtype="int32"),
        "segment_ids": ids,
        "masked_lm_positions": ops.zeros((batch_size, predictions), dtype="int32"),
        "masked_lm_ids": ops.zeros((batch_size, predictions), dtype="int32"),
        "masked_lm_weights": ops.zeros((batch_size, predictions), dtype="float32"),
        "next_sentence_labels": ops.zeros((batch_size, 1), dtype="int32"),
    }


def prediction_losses(outputs, batch):
    """Per-prediction negative log-likelihoods: masked LM (batch, predictions) and next sentence (batch,), the
    latter None without a pair head."""
    mlm_nll = ops.sparse_categorical_crossentropy(batch["masked_lm_ids"], outputs["mlm_logits"], from_logits=True)
    if "nsp_logits" not in outputs:
        return mlm_nll, None
    nsp_labels = ops.reshape(batch["next_sentence_labels"], (-1,))
    nsp_nll = ops.sparse_categorical_crossentropy(nsp_labels, outputs["nsp_logits"], from_logits=True)
    return mlm_nll, nsp_nll


def pretraining_loss(outputs, batch):
    """(total, masked_lm_loss, next_sentence_loss) as in the reference trainer.

    The masked-LM loss is the weighted mean Σ(w·nll) / (Σw + 1e-5): padding predictions have weight 0,
    and the 1e-5 keeps a batch without any prediction finite. The next-sentence loss is a plain mean; without a
    pair head it is None and the total is the masked-LM loss.
    """
    mlm_nll, nsp_nll = prediction_losses(outputs, batch)
    weights = ops.cast(batch["masked_lm_weights"], "float32")
    mlm_loss = ops.sum(weights * mlm_nll) / (ops.sum(weights) + 1e-5)
    if nsp_nll is None:
        return mlm_loss, mlm_loss, None
    nsp_loss = ops.mean(nsp_nll)
    return mlm_loss + nsp_loss, mlm_loss, nsp_loss


def parameter_count(config: BertConfig) -> dict[str, int]:
    """Parameters by part; "matmul" counts the weights used in matrix multiplies, for the FLOP count."""
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    per_layer_matmul = 4 * h * h + 2 * h * i  # Q, K, V, attention output; two feed-forward matrices
    per_layer_other = 3 * h + h + i + h + 4 * h  # biases of those matmuls, two LayerNorms
    embeddings = (v + config.max_position + config.type_vocab_size) * h + 2 * h
    heads = h * h + h + 2 * h + v  # MLM transform, LN, output bias
    if config.pair_head:
        heads += (h * h + h) + (2 * h + 2)  # pooler, NSP
    total = embeddings + config.num_layers * (per_layer_matmul + per_layer_other) + heads
    return {"total": total, "encoder_matmul": config.num_layers * per_layer_matmul, "embeddings": embeddings}


def train_flops_per_sequence(config: BertConfig, seq_len: int, predictions: int) -> float:
    """Model FLOPs of one training step (forward + backward) for one sequence.

    A matmul with N weights costs 2N FLOPs per token forward and 4N backward, hence 6N per token, counted
    over the tokens each matmul actually sees:
      encoder:  6 · L(4H² + 2HI) · S
      MLM head: 6 · (H² + HV) · P          (transform + tied output projection, at the P predictions only)
      pooler + NSP: 6 · (H² + 2H)          (the [CLS] token only; none without a pair head)
    plus attention scores and the weighted sum of values, 2·S²·H FLOPs each per layer forward, ×3 for
    training: 12 · L · S² · H. Padding positions are computed, so they count. Embedding lookups,
    LayerNorm, softmax and GELU are not matmuls and are left out, as usual for MFU.
    """
    h, v = config.hidden_size, config.vocab_size
    encoder = 6 * parameter_count(config)["encoder_matmul"] * seq_len
    mlm = 6 * (h * h + h * v) * predictions
    nsp = 6 * (h * h + 2 * h) if config.pair_head else 0
    attention = 12 * config.num_layers * seq_len * seq_len * h
    return float(encoder + mlm + nsp + attention)
