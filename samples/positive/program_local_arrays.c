/* A whole program with its matrices in local arrays (static and on the stack): the products are
   replaced inside main, and the program prints the same checksums. */
#include <stdio.h>

#define N 50
#define P 37

int main(void)
{
    static double a[N][P], b[P][N], c[N][N];
    float x[P][P], y[P][P], z[P][P];
    double sum = 0.0;
    float fsum = 0.0f;

    for (int i = 0; i < N; i++)
        for (int k = 0; k < P; k++) {
            a[i][k] = (double)((i * 7 + k * 3) % 11) - 5.0;
            b[k][i] = (double)((i * 5 + k * 2) % 13) - 6.0;
        }
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) {
            x[i][j] = (float)((i + 2 * j) % 7) - 3.0f;
            y[i][j] = (float)((3 * i + j) % 5) - 2.0f;
            z[i][j] = 1.0f;
        }

    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0.0;
            for (int k = 0; k < P; k++)
                acc += a[i][k] * b[k][j];
            c[i][j] = acc;
        }

    for (int i = 0; i < P; i++)
        for (int k = 0; k < P; k++)
            for (int j = 0; j < P; j++)
                z[i][j] += x[i][k] * y[k][j];

    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            sum += c[i][j] * (double)(i + j + 1);
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++)
            fsum += z[i][j] * (float)(i - j);
    printf("%.17g %.9g\n", sum, (double)fsum);
    return 0;
}
