int helper(int a, int b)
{
    return a * b;
}

int compute(int n, int y)
{
    int x = 0;
    int unrelated = 7;
    x = n * 2;
    unrelated = unrelated + 1;
    for (int i = 0; i < n; ++i) {
        if (i > y) {
            x = y + 1;
        }
    }
    int z = y * 3;
    int w = helper(x, y);
    return z + w + unrelated;
}

int other(int q)
{
    int r = q + 1;
    return r;
}
