"""Fine-tuning loop in the style of Hugging Face's Trainer, on DirectML when torch-directml is there.

A tiny BERT classifier built from a config (no download), ``model(**batch)``
returning the loss, AdamW with the usual no-decay parameter groups, a linear
warm-up schedule, gradient accumulation and gradient clipping.
"""
import torch
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

try:
    import torch_directml
    device = torch_directml.device()
except ImportError:
    device = torch.device("cpu")

MAX_STEPS = 12
ACCUMULATION = 2


def batches(generator):
    while True:
        input_ids = torch.randint(5, 100, (4, 24), generator=generator)
        attention_mask = torch.ones_like(input_ids)
        attention_mask[:, 20:] = 0
        labels = (input_ids[:, 0] > 50).long()
        yield {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def main():
    torch.manual_seed(42)
    config = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, num_labels=2)
    model = BertForSequenceClassification(config).to(device)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=5e-4)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=MAX_STEPS)
    model.train()
    data = batches(torch.Generator().manual_seed(0))
    for step in range(MAX_STEPS):
        for _ in range(ACCUMULATION):
            batch = {k: v.to(device) for k, v in next(data).items()}
            loss = model(**batch).loss / ACCUMULATION
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if step % 4 == 0:
            print(f"step {step}: loss {loss.item() * ACCUMULATION:.4f} lr {scheduler.get_last_lr()[0]:.2e}")


if __name__ == "__main__":
    main()
