"""The compact BERT pretraining module (Keras) and the loader of pretraining batches."""
