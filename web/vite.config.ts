/// <reference types="vitest/config" />
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The API under /v1 during development: `FLOWLOOM_API=http://127.0.0.1:8400 npm run dev`.
const api = process.env.FLOWLOOM_API ?? 'http://127.0.0.1:8400';

export default defineConfig({
  base: '/',
  plugins: [react()],
  server: { proxy: { '/v1': { target: api, changeOrigin: true } } },
  preview: { proxy: { '/v1': { target: api, changeOrigin: true } } },
  build: {
    chunkSizeWarningLimit: 900,
    rollupOptions: {
      output: {
        manualChunks(id: string) {
          if (id.includes('node_modules/@xyflow') || id.includes('node_modules/d3-')) return 'xyflow';
          if (id.includes('node_modules/react')) return 'react';
          return undefined;
        },
      },
    },
  },
  test: {
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
    environment: 'node',
  },
});
