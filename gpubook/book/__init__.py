"""What only the book needs: its Sphinx extension, the lessons drawn from refusals, and the GEMM ladder as the
chapters show it. Imports every layer below."""
