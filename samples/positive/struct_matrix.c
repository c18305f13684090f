/* Matrices as structs with their sizes, leading dimension and a data pointer. */

struct matrix {
    int rows, cols, ld;
    double *data;
};

/* c += a * b */
void matrix_mul_add(struct matrix *c, const struct matrix *a, const struct matrix *b)
{
    for (int i = 0; i < c->rows; i++)
        for (int k = 0; k < a->cols; k++)
            for (int j = 0; j < c->cols; j++)
                c->data[i * c->ld + j] += a->data[i * a->ld + k] * b->data[k * b->ld + j];
}
