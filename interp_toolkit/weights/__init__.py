"""Weight circuits: factored QK/OV circuits, composition scores, full-vocabulary self-ranks."""
